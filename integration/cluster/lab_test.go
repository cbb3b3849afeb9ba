package cluster_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// controlPlane is a real etcd + kube-apiserver on loopback, started from
// the cached lab binaries (the flags of ../shared/k8s-lab/up.sh), with a
// self-made CA and an admin bearer token.
type controlPlane struct {
	dir        string
	kubeconfig string
	procs      []*proc
}

// proc is a child process whose output goes to a file in the lab dir.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{} // closed once it exited
}

// alive reports whether p still runs.
func (p *proc) alive() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

func startProc(t testing.TB, dir, name string, bin string, args ...string) *proc {
	t.Helper()
	logPath := filepath.Join(dir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	f.Close()
	p := &proc{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() { cmd.Wait(); close(p.done) }()
	return p
}

// stop ends p with sig and waits for it.
func (p *proc) stop(sig syscall.Signal) {
	if !p.alive() {
		return
	}
	p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
	}
}

func (p *proc) tail(n int) string {
	b, _ := os.ReadFile(p.log)
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// freePort returns a loopback port that is free now and lies below the
// kernel's ephemeral range (net.ipv4.ip_local_port_range): the process it
// is for binds it later, and a port from the ephemeral range can be taken
// in between by any outgoing connection on the host (etcd failed with
// "address already in use" that way). Ports are handed out in turn from
// a random start, so two calls in one test process never get the same one.
func freePort(t testing.TB) int {
	t.Helper()
	ports.Lock()
	defer ports.Unlock()
	lo, hi := 10000, ephemeralLow()-1
	if ports.next < lo || ports.next > hi {
		ports.next = lo + mrand.IntN(hi-lo+1)
	}
	for range hi - lo + 1 {
		p := ports.next
		if ports.next++; ports.next > hi {
			ports.next = lo
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err == nil {
			l.Close()
			return p
		}
	}
	t.Fatalf("no free loopback port in %d-%d", lo, hi)
	return 0
}

// ports is freePort's cursor, shared by the package's tests.
var ports struct {
	sync.Mutex
	next int
}

// ephemeralLow is the first port of the kernel's ephemeral range (32768
// when it cannot be read).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	var lo, hi int
	if _, err := fmt.Sscan(string(b), &lo, &hi); err != nil || lo <= 10000 {
		return 32768
	}
	return lo
}

func startControlPlane(t testing.TB, bin string) *controlPlane {
	t.Helper()
	dir := tempDir(t)
	cp := &controlPlane{dir: dir}
	t.Cleanup(func() {
		for i := len(cp.procs) - 1; i >= 0; i-- {
			cp.procs[i].stop(syscall.SIGTERM)
		}
		if t.Failed() {
			for _, p := range cp.procs {
				t.Logf("--- %s log (tail) ---\n%s", p.name, p.tail(3000))
			}
		}
	})
	caPEM := writePKI(t, dir)
	tok := make([]byte, 24)
	rand.Read(tok)
	token := hex.EncodeToString(tok)
	must(t, os.WriteFile(filepath.Join(dir, "tokens.csv"), []byte(token+`,admin,admin,"system:masters"`+"\n"), 0o600))
	etcdPort, peerPort, apiPort := freePort(t), freePort(t), freePort(t)
	etcd := fmt.Sprintf("http://127.0.0.1:%d", etcdPort)
	peer := fmt.Sprintf("http://127.0.0.1:%d", peerPort)
	cp.procs = append(cp.procs, startProc(t, dir, "etcd", filepath.Join(bin, "etcd"),
		"--name", "lab", "--data-dir", filepath.Join(dir, "etcd"),
		"--listen-client-urls", etcd, "--advertise-client-urls", etcd,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", "lab="+peer, "--quota-backend-bytes", "1073741824", "--unsafe-no-fsync"))
	cp.procs = append(cp.procs, startProc(t, dir, "kube-apiserver", filepath.Join(bin, "kube-apiserver"),
		"--etcd-servers", etcd,
		"--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1", "--secure-port", fmt.Sprint(apiPort),
		"--tls-cert-file", filepath.Join(dir, "apiserver.crt"), "--tls-private-key-file", filepath.Join(dir, "apiserver.key"),
		"--client-ca-file", filepath.Join(dir, "ca.crt"),
		"--token-auth-file", filepath.Join(dir, "tokens.csv"),
		"--authorization-mode", "Node,RBAC",
		"--service-account-key-file", filepath.Join(dir, "sa.pub"),
		"--service-account-signing-key-file", filepath.Join(dir, "sa.key"),
		"--service-account-issuer", "https://kubernetes.default.svc",
		"--service-cluster-ip-range", "10.96.0.0/16",
		"--allow-privileged=true", "--endpoint-reconciler-type", "none",
		"--enable-priority-and-fairness=false", "--profiling=false"))
	server := fmt.Sprintf("https://127.0.0.1:%d", apiPort)
	cp.kubeconfig = filepath.Join(dir, "kubeconfig")
	must(t, os.WriteFile(cp.kubeconfig, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: lab
  cluster: {server: "%s", certificate-authority-data: %s}
users:
- name: admin
  user: {token: %s}
contexts:
- name: lab
  context: {cluster: lab, user: admin}
current-context: lab
`, server, base64.StdEncoding.EncodeToString(caPEM), token)), 0o600))
	waitReady(t, cp, server, caPEM, token)
	return cp
}

// waitReady waits (60 s at most) for the API server's /readyz.
func waitReady(t testing.TB, cp *controlPlane, server string, caPEM []byte, token string) {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig.RootCAs = pool
	hc := &http.Client{Transport: tr, Timeout: 2 * time.Second}
	start := time.Now()
	for time.Since(start) < 60*time.Second {
		req, _ := http.NewRequest("GET", server+"/readyz", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		if resp, err := hc.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				t.Logf("kube-apiserver ready in %v", time.Since(start).Round(100*time.Millisecond))
				return
			}
		}
		for _, p := range cp.procs {
			if !p.alive() {
				t.Fatalf("%s exited:\n%s", p.name, p.tail(3000))
			}
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Fatal("kube-apiserver not ready after 60s")
}

// writePKI writes a CA, the API server's serving cert and the service
// account key pair into dir; it returns the CA certificate (PEM).
func writePKI(t testing.TB, dir string) []byte {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "paddock-lab-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	must(t, err)
	caCert, _ := x509.ParseCertificate(caDER)
	srvKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	srvTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "kube-apiserver"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.96.0.1")},
		DNSNames:    []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, caCert, &srvKey.PublicKey, caKey)
	must(t, err)
	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	must(t, err)
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	srvKeyDER, _ := x509.MarshalECPrivateKey(srvKey)
	saPub, _ := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	files := map[string][]byte{
		"ca.crt":        caPEM,
		"apiserver.crt": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srvDER}),
		"apiserver.key": pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: srvKeyDER}),
		"sa.key":        pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(saKey)}),
		"sa.pub":        pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: saPub}),
	}
	for name, b := range files {
		must(t, os.WriteFile(filepath.Join(dir, name), b, 0o600))
	}
	return caPEM
}

// tempDir is a fresh directory searchable by every uid (paddockd refuses a
// state dir under t.TempDir's 0700 parent), removed after the test.
func tempDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "paddock-k8s-")
	must(t, err)
	os.Chmod(dir, 0o755)
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
