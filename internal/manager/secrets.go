package manager

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/paddock-sandbox/paddock/internal/sandbox"
	"github.com/paddock-sandbox/paddock/internal/store"
)

// Secret limits.
const (
	maxSecretValue = 16 << 10
	maxSecretHosts = 32
	maxSecrets     = 256
)

var secretName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)

// hostPattern accepts host names and "*." wildcards.
var hostPattern = regexp.MustCompile(`^(\*\.)?([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)*[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// PutSecret stores owner's secret. Its name is also the env var a sandbox
// sees, so it must be a valid variable name.
func (m *Manager) PutSecret(ctx context.Context, owner string, req sandbox.Secret) (*sandbox.SecretInfo, error) {
	if !secretName.MatchString(req.Name) {
		return nil, fmt.Errorf("%w: secret name must be an env var name ([A-Za-z_][A-Za-z0-9_]*, at most 64)", sandbox.ErrInvalid)
	}
	if req.Value == "" || len(req.Value) > maxSecretValue || strings.ContainsAny(req.Value, "\x00\r\n") {
		return nil, fmt.Errorf("%w: secret value must be 1-%d bytes without NUL or line breaks", sandbox.ErrInvalid, maxSecretValue)
	}
	if len(req.Hosts) == 0 || len(req.Hosts) > maxSecretHosts {
		return nil, fmt.Errorf("%w: a secret needs 1-%d hosts it may be sent to", sandbox.ErrInvalid, maxSecretHosts)
	}
	for i, h := range req.Hosts {
		h = strings.ToLower(strings.TrimSuffix(h, "."))
		if !hostPattern.MatchString(h) || len(h) > 253 {
			return nil, fmt.Errorf("%w: bad secret host %q (a host name or *.domain)", sandbox.ErrInvalid, req.Hosts[i])
		}
		req.Hosts[i] = h
	}
	existing, err := m.store.Secrets(owner)
	if err != nil {
		return nil, err
	}
	if len(existing) >= maxSecrets {
		replacing := false
		for _, s := range existing {
			replacing = replacing || s.Name == req.Name
		}
		if !replacing {
			return nil, fmt.Errorf("%w: at most %d secrets per key", sandbox.ErrLimit, maxSecrets)
		}
	}
	rec := &store.SecretRecord{Owner: owner, Name: req.Name, Value: req.Value, Hosts: req.Hosts, CreatedAt: time.Now().UTC()}
	if err := m.store.PutSecret(rec); err != nil {
		return nil, err
	}
	return &sandbox.SecretInfo{Name: rec.Name, Hosts: rec.Hosts, CreatedAt: rec.CreatedAt}, nil
}

// Secrets lists owner's secrets without their values.
func (m *Manager) Secrets(ctx context.Context, owner string) ([]sandbox.SecretInfo, error) {
	recs, err := m.store.Secrets(owner)
	if err != nil {
		return nil, err
	}
	out := make([]sandbox.SecretInfo, 0, len(recs))
	for _, r := range recs {
		out = append(out, sandbox.SecretInfo{Name: r.Name, Hosts: r.Hosts, CreatedAt: r.CreatedAt})
	}
	return out, nil
}

// DeleteSecret removes owner's secret; sandboxes already using it stop
// getting it substituted.
func (m *Manager) DeleteSecret(ctx context.Context, owner, name string) error {
	return m.store.DeleteSecret(owner, name)
}

// placeholders makes the per-sandbox placeholder of each named secret,
// checking that owner has them.
func (m *Manager) placeholders(owner string, names []string) (map[string]string, error) {
	if len(names) == 0 {
		return nil, nil
	}
	out := map[string]string{}
	for _, n := range names {
		if _, err := m.store.Secret(owner, n); err != nil {
			return nil, fmt.Errorf("%w: unknown secret %q", sandbox.ErrInvalid, n)
		}
		b := make([]byte, 16)
		rand.Read(b)
		out[n] = "paddock-secret-" + strings.ToLower(n) + "-" + hex.EncodeToString(b)
	}
	return out, nil
}
