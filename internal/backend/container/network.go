package container

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/paddock-sandbox/paddock/internal/sandbox"
)

// caBundle is where the sandbox's CA bundle lives (Debian layout; the
// same path is set in SSL_CERT_FILE and friends by the manager).
const (
	caBundle = "etc/ssl/certs/ca-certificates.crt"
	caExtra  = "etc/ssl/certs/paddock-egress-ca.pem"
)

// prepareNetwork writes the files a networked sandbox needs into its
// writable layer: resolv.conf naming the daemon's resolver and, when
// secrets are in play, a CA bundle that trusts the egress proxy's CA.
func prepareNetwork(upper string, uid int, n *sandbox.NetworkConfig) error {
	write := func(rel string, data []byte) error {
		p := filepath.Join(upper, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			return err
		}
		return os.Lchown(p, uid, uid)
	}
	if err := write("etc/resolv.conf", fmt.Appendf(nil, "# Paddock: answered by the daemon's resolver\nnameserver %s\n", n.Nameserver)); err != nil {
		return err
	}
	if len(n.CACertPEM) == 0 {
		return nil
	}
	bundle, _ := os.ReadFile(filepath.Join("/", caBundle))
	bundle = append(bytes.TrimRight(bundle, "\n"), '\n')
	bundle = append(bundle, n.CACertPEM...)
	if err := write(caBundle, bundle); err != nil {
		return err
	}
	return write(caExtra, n.CACertPEM)
}

// joinNetwork points the spec's network namespace at the prepared one.
// That namespace belongs to the host's user namespace, so the sandbox may
// not mount a sysfs for it: /sys becomes a small empty tmpfs instead (the
// host's /sys is never exposed).
func joinNetwork(s *specs.Spec, n *sandbox.NetworkConfig) {
	for i, ns := range s.Linux.Namespaces {
		if ns.Type == specs.NetworkNamespace {
			s.Linux.Namespaces[i].Path = n.NetnsPath
		}
	}
	// net.* sysctls of a host-owned namespace cannot be written from the
	// sandbox's user namespace (and ICMP is not routed anyway).
	delete(s.Linux.Sysctl, "net.ipv4.ping_group_range")
	for i, m := range s.Mounts {
		if m.Destination == "/sys" && m.Type == "sysfs" {
			s.Mounts[i] = specs.Mount{Destination: "/sys", Type: "tmpfs", Source: "tmpfs",
				Options: []string{"nosuid", "noexec", "nodev", "mode=755", "size=1024k"}}
		}
	}
}
