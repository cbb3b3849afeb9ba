package console

import (
	"errors"
	"testing"
	"time"
)

func TestSessionExpiry(t *testing.T) {
	now := time.Unix(1e9, 0)
	s := newSessions(time.Minute, 10*time.Minute, 10, 10, func() time.Time { return now })
	id, _, err := s.create("key_a", "pdk_a")
	if err != nil {
		t.Fatal(err)
	}
	// Used every 50 s it stays alive until the absolute limit.
	for now.Add(50*time.Second).Sub(time.Unix(1e9, 0)) < 10*time.Minute {
		now = now.Add(50 * time.Second)
		if _, ok := s.get(id); !ok {
			t.Fatalf("session ended at %v while in use", now.Sub(time.Unix(1e9, 0)))
		}
	}
	now = time.Unix(1e9, 0).Add(10 * time.Minute)
	if _, ok := s.get(id); ok {
		t.Error("session outlived its maximum age")
	}
	if s.len() != 0 {
		t.Errorf("expired session still in the table (%d)", s.len())
	}
	id, _, _ = s.create("key_a", "pdk_a")
	now = now.Add(time.Minute)
	if _, ok := s.get(id); ok {
		t.Error("session outlived its idle timeout")
	}
	for _, bad := range []string{"", "x", string(make([]byte, 200))} {
		if _, ok := s.get(bad); ok {
			t.Errorf("get(%q) found a session", bad)
		}
	}
}

func TestSessionBounds(t *testing.T) {
	now := time.Unix(1e9, 0)
	s := newSessions(time.Hour, time.Hour, 3, 2, func() time.Time { return now })
	first, _, _ := s.create("key_a", "pdk_a")
	now = now.Add(time.Second)
	second, _, _ := s.create("key_a", "pdk_a")
	now = now.Add(time.Second)
	third, _, err := s.create("key_a", "pdk_a") // per-key bound: ends the oldest
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.get(first); ok {
		t.Error("the oldest session of a key at its bound survived")
	}
	for _, id := range []string{second, third} {
		if _, ok := s.get(id); !ok {
			t.Error("a newer session was ended")
		}
	}
	if _, _, err := s.create("key_b", "pdk_b"); err != nil {
		t.Fatal(err)
	}
	// The table is full (3): another key is refused, nobody is evicted.
	if _, _, err := s.create("key_c", "pdk_c"); !errors.Is(err, errFull) {
		t.Errorf("create beyond the table's bound: %v; want errFull", err)
	}
	if s.len() != 3 {
		t.Errorf("table holds %d; want 3", s.len())
	}
	// Expired sessions make room.
	now = now.Add(2 * time.Hour)
	if _, _, err := s.create("key_c", "pdk_c"); err != nil || s.len() != 1 {
		t.Errorf("create after expiry: %v, table %d", err, s.len())
	}
}

func TestCSRFTokens(t *testing.T) {
	now := time.Unix(1e9, 0)
	s := newSessions(time.Hour, time.Hour, 10, 10, func() time.Time { return now })
	_, a, _ := s.create("key_a", "pdk_a")
	_, b, _ := s.create("key_a", "pdk_a")
	if a.csrf == b.csrf || len(a.csrf) < 40 {
		t.Errorf("CSRF tokens %q %q: want distinct, 256-bit", a.csrf, b.csrf)
	}
	if !csrfOK(a, a.csrf) || csrfOK(a, b.csrf) || csrfOK(a, "") {
		t.Error("csrfOK accepts the wrong token")
	}
}
