package kube

import (
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	"gopkg.in/yaml.v3"
)

// kubeconfig is the part of a kubeconfig file Load reads.
type kubeconfig struct {
	CurrentContext string `yaml:"current-context"`
	Clusters       []struct {
		Name    string `yaml:"name"`
		Cluster struct {
			Server                   string `yaml:"server"`
			CertificateAuthority     string `yaml:"certificate-authority"`
			CertificateAuthorityData string `yaml:"certificate-authority-data"`
			InsecureSkipTLSVerify    bool   `yaml:"insecure-skip-tls-verify"`
		} `yaml:"cluster"`
	} `yaml:"clusters"`
	Users []struct {
		Name string `yaml:"name"`
		User struct {
			Token                 string `yaml:"token"`
			TokenFile             string `yaml:"tokenFile"`
			ClientCertificate     string `yaml:"client-certificate"`
			ClientCertificateData string `yaml:"client-certificate-data"`
			ClientKey             string `yaml:"client-key"`
			ClientKeyData         string `yaml:"client-key-data"`
		} `yaml:"user"`
	} `yaml:"users"`
	Contexts []struct {
		Name    string `yaml:"name"`
		Context struct {
			Cluster string `yaml:"cluster"`
			User    string `yaml:"user"`
		} `yaml:"context"`
	} `yaml:"contexts"`
}

// Load builds a client from the kubeconfig file at path, using its current
// context. An empty path means the pod's service account (InCluster).
func Load(path string) (*Client, error) {
	if path == "" {
		return InCluster()
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	var kc kubeconfig
	if err := yaml.Unmarshal(b, &kc); err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	clusterName, userName := "", ""
	for _, c := range kc.Contexts {
		if c.Name == kc.CurrentContext || kc.CurrentContext == "" {
			clusterName, userName = c.Context.Cluster, c.Context.User
			break
		}
	}
	dir := filepath.Dir(path)
	rel := func(p string) string {
		if p == "" || filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(dir, p)
	}
	tlsCfg := &tls.Config{MinVersion: tls.VersionTLS12}
	server := ""
	for _, c := range kc.Clusters {
		if c.Name != clusterName {
			continue
		}
		server = c.Cluster.Server
		ca, err := dataOrFile(c.Cluster.CertificateAuthorityData, rel(c.Cluster.CertificateAuthority))
		if err != nil {
			return nil, err
		}
		if len(ca) > 0 {
			if tlsCfg.RootCAs, err = certPool(ca); err != nil {
				return nil, err
			}
		}
		tlsCfg.InsecureSkipVerify = c.Cluster.InsecureSkipTLSVerify
	}
	if server == "" {
		return nil, fmt.Errorf("kubeconfig %s: no server for context %q", path, kc.CurrentContext)
	}
	token := ""
	for _, u := range kc.Users {
		if u.Name != userName {
			continue
		}
		token = u.User.Token
		if u.User.TokenFile != "" {
			t, err := os.ReadFile(rel(u.User.TokenFile))
			if err != nil {
				return nil, fmt.Errorf("kubeconfig token file: %w", err)
			}
			token = strings.TrimSpace(string(t))
		}
		cert, err := dataOrFile(u.User.ClientCertificateData, rel(u.User.ClientCertificate))
		if err != nil {
			return nil, err
		}
		key, err := dataOrFile(u.User.ClientKeyData, rel(u.User.ClientKey))
		if err != nil {
			return nil, err
		}
		if len(cert) > 0 {
			pair, err := tls.X509KeyPair(cert, key)
			if err != nil {
				return nil, fmt.Errorf("kubeconfig client certificate: %w", err)
			}
			tlsCfg.Certificates = []tls.Certificate{pair}
		}
	}
	return newClient(server, tlsCfg, func() string { return token }), nil
}

// saDir is where Kubernetes mounts a pod's service account.
const saDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// InCluster builds a client from the pod's service account; the token is
// re-read on every request, since the kubelet rotates it.
func InCluster() (*Client, error) {
	host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		return nil, errors.New("not in a Kubernetes pod (KUBERNETES_SERVICE_HOST unset); pass --kubeconfig")
	}
	ca, err := os.ReadFile(filepath.Join(saDir, "ca.crt"))
	if err != nil {
		return nil, fmt.Errorf("service account: %w", err)
	}
	pool, err := certPool(ca)
	if err != nil {
		return nil, err
	}
	tok := func() string {
		b, _ := os.ReadFile(filepath.Join(saDir, "token"))
		return strings.TrimSpace(string(b))
	}
	return newClient("https://"+net.JoinHostPort(host, port),
		&tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool}, tok), nil
}

// InClusterNamespace is the pod's namespace, or "" outside a pod.
func InClusterNamespace() string {
	b, _ := os.ReadFile(filepath.Join(saDir, "namespace"))
	return strings.TrimSpace(string(b))
}

func dataOrFile(data, file string) ([]byte, error) {
	if data != "" {
		b, err := base64.StdEncoding.DecodeString(data)
		if err != nil {
			return nil, fmt.Errorf("kubeconfig: bad base64: %w", err)
		}
		return b, nil
	}
	if file == "" {
		return nil, nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	return b, nil
}
