// Command paddock-gateway is the stateless front of a Paddock cluster on
// Kubernetes (docs/kubernetes.md): it serves the same REST API as paddockd,
// placing creates on a node with room and proxying every other call to the
// sandbox's node, found through the Sandbox resources and node Leases.
//
//	paddock-gateway [serve] [flags]              serve the API
//	paddock-gateway keys create --name NAME      create an API key (a Secret) and print it
//	paddock-gateway install                      create the namespace and the Sandbox CRD
//	paddock-gateway version
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/paddock-sandbox/paddock/internal/cluster"
	"github.com/paddock-sandbox/paddock/internal/cluster/kube"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

const usage = `paddock-gateway: the stateless API gateway of a Paddock cluster on Kubernetes

Usage:
  paddock-gateway [serve] [flags]           serve the REST API
  paddock-gateway keys create --name NAME   create an API key (stored hashed in a Secret) and print it
  paddock-gateway install                   create the namespace and the Sandbox CRD (needs admin rights)
  paddock-gateway version                   print the version

Common flags: --kubeconfig FILE (default: the pod's service account), --namespace NS (default "paddock").
`

func main() {
	args := os.Args[1:]
	cmd := "serve"
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		cmd, args = args[0], args[1:]
	}
	var err error
	switch cmd {
	case "serve":
		err = serve(args)
	case "keys":
		if len(args) == 0 || args[0] != "create" {
			err = errors.New("usage: paddock-gateway keys create --name NAME")
			break
		}
		err = keysCreate(args[1:])
	case "install":
		err = install(args)
	case "version":
		fmt.Println("paddock-gateway", version)
	case "help", "-h", "--help":
		fmt.Print(usage)
	default:
		fmt.Fprintf(os.Stderr, "paddock-gateway: unknown command %q\n\n%s", cmd, usage)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "paddock-gateway:", err)
		os.Exit(1)
	}
}

// common are the flags every subcommand has.
type common struct{ kubeconfig, namespace *string }

func commonFlags(fs *flag.FlagSet) common {
	return common{
		kubeconfig: fs.String("kubeconfig", "", "kubeconfig of the cluster (default: the pod's service account)"),
		namespace:  fs.String("namespace", "", `namespace of the Leases, Sandboxes and key Secrets (default "paddock" or the pod's)`),
	}
}

func (c common) client() (*kube.Client, string, error) {
	kc, err := kube.Load(*c.kubeconfig)
	if err != nil {
		return nil, "", err
	}
	ns := *c.namespace
	if ns == "" {
		if ns = kube.InClusterNamespace(); ns == "" {
			ns = "paddock"
		}
	}
	return kc, ns, nil
}

func parse(fs *flag.FlagSet, args []string) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		os.Exit(2)
	}
}

func serve(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	c := commonFlags(fs)
	listen := fs.String("listen", "127.0.0.1:7420", "address to serve the API on")
	cacheFor := fs.Duration("cache-for", time.Second, "how long node Leases and API keys read from the cluster are reused")
	portsDomain := fs.String("ports-domain", "", "the nodes' --ports-domain: route <port>-<sandbox id>.DOMAIN hosts to the sandbox's node")
	e2bListen := fs.String("e2b-listen", "", "address of the cluster's E2B-compatible endpoint (off if empty; routes to the nodes' --e2b-listen endpoints)")
	e2bDomain := fs.String("e2b-domain", "", "the nodes' --e2b-domain: route E2B <port>-<sandbox id>.DOMAIN hosts to the sandbox's node")
	parse(fs, args)
	kc, ns, err := c.client()
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	gw, err := cluster.NewGateway(cluster.GatewayConfig{Kube: kc, Namespace: ns, Version: version, CacheFor: *cacheFor, PortsDomain: *portsDomain,
		E2BDomain: *e2bDomain, Log: log})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: gw, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute,
		MaxHeaderBytes: 64 << 10, ConnContext: cluster.ConnContext}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	errc := make(chan error, 2)
	go func() { errc <- srv.Serve(ln) }()
	if *e2bListen != "" {
		eln, err := net.Listen("tcp", *e2bListen)
		if err != nil {
			return err
		}
		esrv := &http.Server{Handler: gw.E2BHandler(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute,
			MaxHeaderBytes: 64 << 10}
		go func() { errc <- esrv.Serve(eln) }()
		defer esrv.Close()
		log.Info("paddock-gateway E2B endpoint serving", "url", "http://"+eln.Addr().String())
	}
	log.Info("paddock-gateway serving", "url", "http://"+ln.Addr().String(), "namespace", ns, "version", version)
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	return srv.Shutdown(sctx)
}

func keysCreate(args []string) error {
	fs := flag.NewFlagSet("keys create", flag.ContinueOnError)
	c := commonFlags(fs)
	name := fs.String("name", "", "name of the key (required)")
	parse(fs, args)
	kc, ns, err := c.client()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	secret, rec, err := cluster.CreateKey(ctx, kc, ns, *name)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "created key %s (%s); it is shown once:\n", rec.ID, rec.Name)
	fmt.Println(secret)
	return nil
}

func install(args []string) error {
	fs := flag.NewFlagSet("install", flag.ContinueOnError)
	c := commonFlags(fs)
	parse(fs, args)
	kc, ns, err := c.client()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return cluster.Install(ctx, kc, ns)
}
