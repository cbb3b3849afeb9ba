package egress

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"io"
	"net/http"
	"strings"
)

// Secret is a credential bound to a sandbox. The sandbox holds only
// Placeholder; the proxy puts Value in its place in the headers of requests
// to Hosts (names or "*." wildcards, as in Rules; a bare "*" is ignored).
type Secret struct {
	Name        string
	Value       string
	Placeholder string
	Hosts       []string
	// AllowPlainHTTP lets the proxy substitute in plain-HTTP requests too.
	// By default it substitutes only inside TLS it terminated itself, and
	// plain-HTTP requests to a bound host are forwarded untouched.
	AllowPlainHTTP bool
}

// Placeholder returns a new placeholder for a secret named secretName:
// "paddock-secret-<name>-<32 random hex digits>". It is random, so no
// sandbox can guess another's, and it is only ever replaced for the
// sandbox it was issued to; the caller stores one per sandbox and secret
// and hands it to Config.Secrets.
func Placeholder(secretName string) string {
	var b strings.Builder
	for _, r := range secretName {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
		if b.Len() >= 64 {
			break
		}
	}
	rnd := make([]byte, 16)
	rand.Read(rnd)
	return "paddock-secret-" + b.String() + "-" + hex.EncodeToString(rnd)
}

// usable reports whether s can be substituted at all: a value with CR, LF
// or NUL would let a header be split, and a short placeholder could occur
// by accident.
func (s Secret) usable() bool {
	return len(s.Placeholder) >= 8 && s.Value != "" &&
		!strings.ContainsAny(s.Value, "\r\n\x00") && !strings.Contains(s.Value, s.Placeholder)
}

// boundTo reports whether the secret may be sent to host. A bare "*" binds
// nothing: a secret must name the hosts it is for.
func (s Secret) boundTo(host string) bool {
	for _, h := range s.Hosts {
		if strings.TrimSpace(h) != "*" && MatchHost(h, host) {
			return true
		}
	}
	return false
}

// substituteHeaders replaces every placeholder in h's values with its
// secret's value.
func substituteHeaders(h http.Header, secrets []Secret) {
	for k, vs := range h {
		for i, v := range vs {
			for _, s := range secrets {
				if strings.Contains(v, s.Placeholder) {
					v = strings.ReplaceAll(v, s.Placeholder, s.Value)
				}
			}
			h[k][i] = v
		}
	}
}

// redactHeaders puts placeholders back where a response header carries a
// secret's value.
func redactHeaders(h http.Header, secrets []Secret) {
	for k, vs := range h {
		for i, v := range vs {
			for _, s := range secrets {
				if strings.Contains(v, s.Value) {
					v = strings.ReplaceAll(v, s.Value, s.Placeholder)
				}
			}
			h[k][i] = v
		}
	}
}

// redactReader masks every occurrence of the secret values in a body
// stream with as many '*' (so lengths, and Content-Length, stay valid). It
// holds back only a tail that could be the start of a value, so a streamed
// body is not delayed.
type redactReader struct {
	r       io.ReadCloser
	values  [][]byte
	pending []byte // read, not yet scanned to the end
	out     []byte // scanned, ready to return
	err     error
	chunk   []byte
}

func newRedactReader(r io.ReadCloser, secrets []Secret) io.ReadCloser {
	rr := &redactReader{r: r, chunk: make([]byte, 32<<10)}
	for _, s := range secrets {
		rr.values = append(rr.values, []byte(s.Value))
	}
	return rr
}

func (r *redactReader) Read(p []byte) (int, error) {
	for len(r.out) == 0 {
		if r.err != nil {
			if len(r.pending) > 0 {
				r.out, r.pending = r.pending, nil
				break
			}
			return 0, r.err
		}
		n, err := r.r.Read(r.chunk)
		r.pending = append(r.pending, r.chunk[:n]...)
		r.err = err
		for _, v := range r.values {
			for off := 0; ; {
				i := bytes.Index(r.pending[off:], v)
				if i < 0 {
					break
				}
				for j := off + i; j < off+i+len(v); j++ {
					r.pending[j] = '*'
				}
				off += i + len(v)
			}
		}
		if r.err != nil {
			continue
		}
		hold := r.partialTail()
		cut := len(r.pending) - hold
		r.out = r.pending[:cut:cut]
		r.pending = append([]byte(nil), r.pending[cut:]...)
	}
	n := copy(p, r.out)
	r.out = r.out[n:]
	return n, nil
}

// partialTail is the length of the longest suffix of pending that is a
// proper prefix of a value.
func (r *redactReader) partialTail() int {
	best := 0
	for _, v := range r.values {
		for l := min(len(v)-1, len(r.pending)); l > best; l-- {
			if bytes.HasPrefix(v, r.pending[len(r.pending)-l:]) {
				best = l
				break
			}
		}
	}
	return best
}

func (r *redactReader) Close() error { return r.r.Close() }
