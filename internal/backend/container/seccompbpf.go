package container

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// The seccomp profile (moby's default, about 400 syscalls with argument
// conditions) is the same for every sandbox, yet a runtime compiles it
// with libseccomp on every create: about a third of a create's runtime
// CPU. crun can take the compiled filter instead, as the annotation
// seccompBPFAnnotation (base64 of the raw struct sock_filter array); it
// then writes those bytes where its own compiler would have (the
// container's seccomp.bpf in its state directory) and loads them the same
// way: the spec's seccomp flags still apply (none: crun adds
// SECCOMP_FILTER_FLAG_SPEC_ALLOW, hence crunSeccompFlags), the spec's
// syscall rules are not compiled, and no_new_privs stays as the spec says
// (ours sets it, so loading the filter needs no privilege).
//
// Where the filter comes from: crun's own compile. The first sandbox of
// a profile runs without the annotation; crun compiles the profile and
// leaves the result in <root>/<id>/seccomp.bpf, which bpfCache keeps, in
// memory, keyed by the SHA-256 of the profile's JSON. Every later sandbox
// of that profile gets those exact bytes, so its filter is, bit for bit,
// the one crun would have compiled from the spec: equivalence by
// construction, no second compiler, no cgo in paddockd. The full profile
// stays in the spec, so a crun that ignores the annotation still enforces
// it. The cache dies with the daemon: a new daemon (or a new crun or
// libseccomp under it) compiles once again.
const seccompBPFAnnotation = "run.oci.seccomp_bpf_data"

// crunSeccompFlags are the seccomp flags written for crun. With none,
// crun loads the filter with SECCOMP_FILTER_FLAG_SPEC_ALLOW, which leaves
// speculative store bypass unmitigated in the sandbox on kernels whose
// spec_store_bypass_disable mode is "seccomp" (the default before Linux
// 5.16); runc passes no such flag. TSYNC alone changes nothing else: the
// runtime is single-threaded when it loads the filter.
var crunSeccompFlags = []specs.LinuxSeccompFlag{"SECCOMP_FILTER_FLAG_TSYNC"}

// bpfMaxProfiles bounds the cache: one entry per distinct profile (one
// today: every sandbox gets the same).
const bpfMaxProfiles = 16

// bpfMaxBytes is the largest filter the kernel loads (BPF_MAXINSNS
// instructions of 8 bytes).
const bpfMaxBytes = 4096 * 8

// bpfCache holds the compiled seccomp filters one crun made, by profile.
type bpfCache struct {
	mu     sync.Mutex
	byHash map[string]string // profile hash → base64 filter
}

// profileHash is the cache key of a profile: the SHA-256 of its JSON.
func profileHash(sc *specs.LinuxSeccomp) (string, error) {
	b, err := json.Marshal(sc)
	if err != nil {
		return "", fmt.Errorf("seccomp profile: %w", err)
	}
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:]), nil
}

// prepare sets crun's seccomp flags on s and, when the filter of s's
// profile is known, the annotation carrying it. It returns the profile's
// hash when the filter is not known yet (learn it after the create), or
// "".
func (c *bpfCache) prepare(s *specs.Spec) (string, error) {
	if s.Linux == nil || s.Linux.Seccomp == nil {
		return "", nil
	}
	s.Linux.Seccomp.Flags = crunSeccompFlags
	h, err := profileHash(s.Linux.Seccomp)
	if err != nil {
		return "", err
	}
	c.mu.Lock()
	bpf, ok := c.byHash[h]
	c.mu.Unlock()
	if !ok {
		return h, nil
	}
	if s.Annotations == nil {
		s.Annotations = map[string]string{}
	}
	s.Annotations[seccompBPFAnnotation] = bpf
	return "", nil
}

// learn keeps the filter crun compiled for container id (its seccomp.bpf
// under root) as the filter of the profile with hash h.
func (c *bpfCache) learn(root, id, h string) error {
	b, err := os.ReadFile(filepath.Join(root, id, "seccomp.bpf"))
	if err != nil {
		return fmt.Errorf("compiled seccomp filter: %w", err)
	}
	if len(b) == 0 || len(b)%8 != 0 || len(b) > bpfMaxBytes {
		return fmt.Errorf("compiled seccomp filter: %d bytes is no BPF program", len(b))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byHash == nil {
		c.byHash = map[string]string{}
	}
	if _, ok := c.byHash[h]; !ok && len(c.byHash) < bpfMaxProfiles {
		c.byHash[h] = base64.StdEncoding.EncodeToString(b)
	}
	return nil
}
