package store

import (
	"errors"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/internal/sandbox"
)

func TestRecordsSurviveReopen(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	for i, id := range []string{"b", "a", "c"} {
		r := &Record{ID: id, Owner: "k", State: sandbox.Running, CreatedAt: now.Add(time.Duration(i) * time.Second)}
		if err := s.Put(r); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Update("a", func(r *Record) error { r.State = sandbox.Terminated; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Update("zz", func(*Record) error { return nil }); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("update missing: %v", err)
	}
	s.Close()
	s, err = Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	all, err := s.All()
	if err != nil {
		t.Fatal(err)
	}
	var ids string
	for _, r := range all {
		ids += r.ID
	}
	if ids != "bac" {
		t.Fatalf("order %q, want bac", ids)
	}
	r, err := s.Get("a")
	if err != nil || r.State != sandbox.Terminated {
		t.Fatalf("get a: %v %v", r, err)
	}
	if _, err := Open(dir); err == nil {
		t.Fatal("second open of a locked store succeeded")
	}
}

func TestKeys(t *testing.T) {
	dir := t.TempDir()
	k, err := OpenKeys(dir)
	if err != nil {
		t.Fatal(err)
	}
	secret, rec, err := k.Create("alice")
	if err != nil {
		t.Fatal(err)
	}
	// A second handle (another process) sees the key at once.
	k2, _ := OpenKeys(dir)
	got, ok := k2.Lookup(secret)
	if !ok || got.ID != rec.ID || got.Name != "alice" {
		t.Fatalf("lookup: %v %v", got, ok)
	}
	for _, bad := range []string{"", "pdk_nope", secret + "x", "Bearer " + secret} {
		if _, ok := k2.Lookup(bad); ok {
			t.Errorf("lookup(%q) succeeded", bad)
		}
	}
	if _, _, err := k.Create(""); err == nil {
		t.Error("empty name accepted")
	}
}
