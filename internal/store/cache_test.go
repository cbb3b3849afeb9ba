package store

import (
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/internal/sandbox"
)

// fill sets every field reachable from v to a value derived from seed:
// pointers allocated, maps and slices given two entries.
func fill(v reflect.Value, seed int) {
	switch v.Kind() {
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem(), seed)
	case reflect.Struct:
		if v.Type() == reflect.TypeOf(time.Time{}) {
			v.Set(reflect.ValueOf(time.Unix(int64(1e9+seed), 0).UTC()))
			return
		}
		for i := range v.NumField() {
			fill(v.Field(i), seed+i+1)
		}
	case reflect.Map:
		v.Set(reflect.MakeMap(v.Type()))
		for i := range 2 {
			k := reflect.New(v.Type().Key()).Elem()
			fill(k, seed*10+i)
			e := reflect.New(v.Type().Elem()).Elem()
			fill(e, seed*10+i+5)
			v.SetMapIndex(k, e)
		}
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		for i := range 2 {
			fill(v.Index(i), seed*10+i)
		}
	case reflect.String:
		v.SetString(fmt.Sprintf("s%d", seed))
	case reflect.Int, reflect.Int64:
		v.SetInt(int64(seed))
	case reflect.Float64:
		v.SetFloat(float64(seed) + 0.5)
	case reflect.Bool:
		v.SetBool(seed%2 == 0)
	default:
		panic("fill: add kind " + v.Kind().String())
	}
}

// TestRecordClone: a clone equals its record, and filling every field of
// the clone anew (every map, slice and pointer target) leaves the record
// as it was, so Clone shares nothing, whatever fields Record gains.
func TestRecordClone(t *testing.T) {
	var r, want Record
	fill(reflect.ValueOf(&r).Elem(), 1)
	fill(reflect.ValueOf(&want).Elem(), 1)
	c := r.Clone()
	if !reflect.DeepEqual(c, &r) {
		t.Fatalf("clone differs:\n%+v\n%+v", c, r)
	}
	// Write through the clone's own maps, slices and pointers.
	for k := range c.Metadata {
		c.Metadata[k] = "changed"
	}
	for k := range c.Env {
		c.Env[k] = "changed"
	}
	for k := range c.Placeholders {
		c.Placeholders[k] = "changed"
	}
	c.History[0].Reason, c.Secrets[0], c.Network.Allow[0], c.Network.Deny[0] = "changed", "changed", "changed", "changed"
	*c.EndedAt, *c.PausedAt, *c.StoppedAt, *c.StopAt = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	fill(reflect.ValueOf(c).Elem(), 7)
	if !reflect.DeepEqual(r, want) {
		t.Fatalf("changing the clone changed the record:\n%+v\nwant\n%+v", r, want)
	}
}

// TestRecordCache: reads decode a record only when its stored bytes
// changed, hand out copies, and always see what was committed.
func TestRecordCache(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	now := time.Now().UTC()
	for i := range 50 {
		r := &Record{ID: fmt.Sprintf("sb%02d", i), Owner: "k", State: sandbox.Running, CreatedAt: now,
			Metadata: map[string]string{"n": fmt.Sprint(i)}}
		if err := s.Put(r); err != nil {
			t.Fatal(err)
		}
	}
	decodes := func() int64 { return s.cache.decodes.Load() }
	all := func() []*Record {
		t.Helper()
		recs, err := s.All()
		if err != nil || len(recs) == 0 {
			t.Fatalf("all: %d records, %v", len(recs), err)
		}
		return recs
	}
	all()
	d0 := decodes()
	recs := all()
	if n := decodes() - d0; n != 0 {
		t.Fatalf("a second read of 50 unchanged records decoded %d", n)
	}
	// A caller changing what it got changes nothing stored or cached.
	recs[3].Metadata["n"], recs[3].State = "mine", sandbox.Terminated
	if g, _ := s.Get("sb03"); g.Metadata["n"] != "3" || g.State != sandbox.Running {
		t.Fatalf("a caller's change reached the cache: %+v", g)
	}
	// An update is seen at once, with one decode for the changed record.
	if _, err := s.Update("sb05", func(r *Record) error { r.State = sandbox.Paused; return nil }); err != nil {
		t.Fatal(err)
	}
	d0 = decodes()
	recs = all()
	if recs[5].State != sandbox.Paused || decodes()-d0 != 1 {
		t.Fatalf("after an update: state %s, %d decodes (want paused, 1)", recs[5].State, decodes()-d0)
	}
	// A failed transaction leaves the committed value readable.
	boom := errors.New("boom")
	if err := s.UpdateMany([]string{"sb06", "sb07"}, func(r *Record) error {
		r.State = sandbox.Stopped
		if r.ID == "sb07" {
			return boom
		}
		return nil
	}); !errors.Is(err, boom) {
		t.Fatalf("update many: %v", err)
	}
	for _, id := range []string{"sb06", "sb07"} {
		if g, _ := s.Get(id); g.State != sandbox.Running {
			t.Fatalf("%s after a failed transaction: %s", id, g.State)
		}
	}
	// A deleted record is gone, and so is its cache entry; one put back
	// under the same id reads as the new one.
	if err := s.Delete("sb08"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get("sb08"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("get deleted: %v", err)
	}
	if len(all()) != 49 || len(s.cache.m) != 49 {
		t.Fatalf("after a delete: cache holds %d", len(s.cache.m))
	}
	if err := s.Put(&Record{ID: "sb09", Owner: "other", State: sandbox.Creating, CreatedAt: now}); err != nil {
		t.Fatal(err)
	}
	if g, _ := s.Get("sb09"); g.Owner != "other" || g.Metadata != nil {
		t.Fatalf("replaced record read as %+v", g)
	}
}
