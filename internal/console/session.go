package console

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"sync"
	"time"
)

// Session bounds (Config overrides each; docs/console.md lists them).
const (
	// DefaultIdleTTL ends a session unused for this long.
	DefaultIdleTTL = 30 * time.Minute
	// DefaultMaxTTL ends a session this long after sign-in, used or not.
	DefaultMaxTTL = 8 * time.Hour
	// DefaultMaxSessions bounds the session table; a sign-in beyond it is
	// refused (other tenants' sessions are never evicted).
	DefaultMaxSessions = 1024
	// DefaultMaxPerKey bounds the sessions of one API key; a sign-in
	// beyond it ends that key's oldest session.
	DefaultMaxPerKey = 8
)

// errFull is returned by create when the table holds MaxSessions live
// sessions.
var errFull = errors.New("too many console sessions: try again later")

// session is one signed-in browser. The API key stays in daemon memory
// for the session's life, never in the cookie nor on disk: each request
// forwarded to the API carries it, so the API authenticates it afresh
// (a deleted key ends its sessions at once).
type session struct {
	keyID   string
	key     string
	csrf    string
	created time.Time
	used    time.Time
}

// sessions is the bounded, expiring session table, keyed by the SHA-256
// of the cookie's value.
type sessions struct {
	idle, maxAge     time.Duration
	maxAll, maxPerKy int
	now              func() time.Time

	mu sync.Mutex
	m  map[[32]byte]*session
}

func newSessions(idle, maxAge time.Duration, maxAll, maxPerKey int, now func() time.Time) *sessions {
	return &sessions{idle: idle, maxAge: maxAge, maxAll: maxAll, maxPerKy: maxPerKey, now: now,
		m: map[[32]byte]*session{}}
}

// randToken returns 32 random bytes, base64url.
func randToken() string {
	b := make([]byte, 32)
	rand.Read(b) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b)
}

func (s *sessions) expired(x *session, now time.Time) bool {
	return now.Sub(x.used) >= s.idle || now.Sub(x.created) >= s.maxAge
}

// create signs in keyID (whose secret is key) and returns the cookie value
// and the session.
func (s *sessions) create(keyID, key string) (string, session, error) {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	var oldest [32]byte
	var oldestAt time.Time
	mine := 0
	for h, x := range s.m {
		if s.expired(x, now) {
			delete(s.m, h)
			continue
		}
		if x.keyID == keyID {
			mine++
			if oldestAt.IsZero() || x.created.Before(oldestAt) {
				oldest, oldestAt = h, x.created
			}
		}
	}
	if mine >= s.maxPerKy {
		delete(s.m, oldest)
	} else if len(s.m) >= s.maxAll {
		return "", session{}, errFull
	}
	id := randToken()
	x := &session{keyID: keyID, key: key, csrf: randToken(), created: now, used: now}
	s.m[sha256.Sum256([]byte(id))] = x
	return id, *x, nil
}

// get returns the live session of cookie value id and marks it used.
func (s *sessions) get(id string) (session, bool) {
	if id == "" || len(id) > 128 {
		return session{}, false
	}
	h := sha256.Sum256([]byte(id))
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	x, ok := s.m[h]
	if !ok {
		return session{}, false
	}
	if s.expired(x, now) {
		delete(s.m, h)
		return session{}, false
	}
	x.used = now
	return *x, true
}

// remove ends the session of cookie value id.
func (s *sessions) remove(id string) {
	h := sha256.Sum256([]byte(id))
	s.mu.Lock()
	delete(s.m, h)
	s.mu.Unlock()
}

// len is the number of sessions in the table, expired ones included.
func (s *sessions) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}

// expiresAt is when x ends if it stays in use.
func (s *sessions) expiresAt(x session) time.Time { return x.created.Add(s.maxAge) }

// csrfOK reports whether token is x's CSRF token, in constant time.
func csrfOK(x session, token string) bool {
	return token != "" && subtle.ConstantTimeCompare([]byte(x.csrf), []byte(token)) == 1
}
