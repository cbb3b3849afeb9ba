package manager

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/internal/pool"
	"github.com/paddock-sandbox/paddock/internal/sandbox"
	"github.com/paddock-sandbox/paddock/internal/store"
)

// fakeBackend is an in-memory sandbox.Backend whose "agents" are one HTTP
// server on a unix socket that records PUT /env by sandbox id.
type fakeBackend struct {
	sock string

	mu         sync.Mutex
	live       map[string]sandbox.Spec
	dead       map[string]bool
	creates    []sandbox.Spec
	destroys   []string
	updates    map[string]sandbox.Resources
	envs       map[string]map[string]string
	failUpdate bool
}

func newFakeBackend(t *testing.T) *fakeBackend {
	b := &fakeBackend{sock: filepath.Join(t.TempDir(), "agent.sock"), live: map[string]sandbox.Spec{},
		dead: map[string]bool{}, updates: map[string]sandbox.Resources{}, envs: map[string]map[string]string{}}
	ln, err := net.Listen("unix", b.sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPut || r.URL.Path != "/env" {
			http.NotFound(w, r)
			return
		}
		var env map[string]string
		if err := json.NewDecoder(r.Body).Decode(&env); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		b.mu.Lock()
		b.envs[r.Host] = env
		b.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return b
}

func (b *fakeBackend) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Info, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.live[spec.ID] = spec
	b.creates = append(b.creates, spec)
	return sandbox.Info{ID: spec.ID, Runtime: "fake"}, nil
}

func (b *fakeBackend) Destroy(ctx context.Context, id string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.live, id)
	b.destroys = append(b.destroys, id)
	return nil
}

func (b *fakeBackend) Alive(ctx context.Context, id string) (bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, ok := b.live[id]
	return ok && !b.dead[id], nil
}

func (b *fakeBackend) Dial(ctx context.Context, id string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "unix", b.sock)
}

func (b *fakeBackend) List(ctx context.Context) ([]string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for id := range b.live {
		out = append(out, id)
	}
	return out, nil
}

func (b *fakeBackend) Templates() []string { return []string{"base", "other"} }

func (b *fakeBackend) spec(id string) sandbox.Spec {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.live[id]
}

func (b *fakeBackend) nLive() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.live)
}

func (b *fakeBackend) nCreates() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.creates)
}

// updBackend adds sandbox.Updater to a fakeBackend.
type updBackend struct{ *fakeBackend }

func (b updBackend) Update(ctx context.Context, id string, r sandbox.Resources) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.failUpdate {
		return errors.New("update refused")
	}
	b.updates[id] = r
	return nil
}

// newPoolManager starts a manager over be with a pool of n "base"
// sandboxes and waits until the pool is full.
func newPoolManager(t *testing.T, be sandbox.Backend, n int) (*Manager, *store.Store, func()) {
	t.Helper()
	dir := t.TempDir()
	st, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	cfg := DefaultConfig()
	cfg.WarmPool = pool.Config{Templates: map[string]pool.Limits{"base": {Min: n, Max: n}}}
	cfg.ReapInterval, cfg.LivenessInterval = 10*time.Millisecond, 10*time.Millisecond
	cfg.MaxSandboxes = 10
	m := New(cfg, Deps{Store: st, Backend: be, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err := m.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m.Run(ctx); close(done) }()
	stop := func() { cancel(); <-done }
	t.Cleanup(stop)
	waitIdle(t, m, n)
	return m, st, stop
}

// idleIDs returns the ids of m's idle "base" pool sandboxes.
func idleIDs(m *Manager) []string {
	return m.pool.Idle("base")
}

func waitIdle(t *testing.T, m *Manager, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for m.PoolStatus(context.Background())["base"] != [2]int{n, 0} {
		if time.Now().After(deadline) {
			t.Fatalf("pool: %v, want %d idle", m.PoolStatus(context.Background()), n)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestPoolHandOut(t *testing.T) {
	fb := newFakeBackend(t)
	m, _, _ := newPoolManager(t, updBackend{fb}, 2)
	ctx := context.Background()
	rec, err := m.Create(ctx, "alice", sandbox.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if fb.nCreates() != 2 || rec.Owner != "alice" || rec.State != sandbox.Running || rec.Runtime != "fake" ||
		rec.ExpiresAt.Sub(rec.CreatedAt) != 300*time.Second || time.Since(rec.CreatedAt) > time.Second {
		t.Fatalf("default create: creates %d, %+v", fb.nCreates(), rec)
	}
	if got, err := m.Get(context.Background(), "alice", rec.ID); err != nil || got.Owner != "alice" {
		t.Fatalf("get: %+v %v", got, err)
	}

	idle := idleIDs(m)
	rec, err = m.Create(ctx, "alice", sandbox.CreateRequest{
		Resources: sandbox.Resources{MemoryMiB: 1024, VCPUs: 2}, Env: map[string]string{"A": "1"},
		Metadata: map[string]string{"k": "v"}, TimeoutSeconds: 60, OnTimeout: sandbox.OnTimeoutPause, MaxCostMicros: 1e9,
	})
	if err != nil {
		t.Fatal(err)
	}
	fb.mu.Lock()
	upd, env := fb.updates[rec.ID], fb.envs[rec.ID]
	fb.mu.Unlock()
	want := sandbox.Resources{VCPUs: 2, MemoryMiB: 1024, DiskMiB: 1024, PIDs: 256}
	if upd != want || !reflect.DeepEqual(env, map[string]string{"A": "1"}) || rec.Resources != want ||
		rec.Metadata["k"] != "v" || rec.OnTimeout != sandbox.OnTimeoutPause || rec.MaxCostMicros != 1e9 ||
		rec.TimeoutSeconds != 60 || rec.ExpiresAt.Sub(rec.CreatedAt) != 60*time.Second || rec.Env["A"] != "1" {
		t.Fatalf("custom create: update %+v env %v record %+v", upd, env, rec)
	}
	if !slices.Contains(idle, rec.ID) {
		t.Fatalf("custom create was not pooled: %s not in %v", rec.ID, idle)
	}

	// What an update cannot give exactly: cold, with the request's spec.
	for _, r := range []sandbox.Resources{
		{DiskMiB: 100},   // the disk is sized at creation
		{PIDs: 64},       // also the agent's RLIMIT_NPROC
		{MemoryMiB: 128}, // /dev/shm is sized from memory below 256 MiB
	} {
		rec, err = m.Create(ctx, "alice", sandbox.CreateRequest{Resources: r, Env: map[string]string{"B": "2"}})
		if err != nil {
			t.Fatal(err)
		}
		spec := fb.spec(rec.ID)
		if slices.Contains(idle, rec.ID) || spec.Env["B"] != "2" || (r.DiskMiB != 0 && spec.Resources.DiskMiB != r.DiskMiB) ||
			(r.PIDs != 0 && spec.Resources.PIDs != r.PIDs) || (r.MemoryMiB != 0 && spec.Resources.MemoryMiB != r.MemoryMiB) {
			t.Fatalf("cold create %+v spec: %+v", r, spec)
		}
	}
	// Another template (not pooled): cold.
	if rec, err = m.Create(ctx, "alice", sandbox.CreateRequest{Template: "other"}); err != nil || fb.spec(rec.ID).Template != "other" {
		t.Fatalf("other template: %+v %v", rec, err)
	}
	waitIdle(t, m, 2)
	if n := fb.nLive(); n != 8 {
		t.Fatalf("6 sandboxes + pool of 2, live: %d", n)
	}
	// Pool sandboxes are not alice's.
	if l, _, _ := m.List(context.Background(), "alice", Filter{}); len(l) != 6 {
		t.Fatalf("alice lists %d sandboxes", len(l))
	}
}

func TestPoolFallbacks(t *testing.T) {
	t.Run("no updater", func(t *testing.T) {
		fb := newFakeBackend(t)
		m, _, _ := newPoolManager(t, fb, 1)
		rec, err := m.Create(context.Background(), "alice", sandbox.CreateRequest{Resources: sandbox.Resources{MemoryMiB: 256}})
		if err != nil {
			t.Fatal(err)
		}
		if fb.nCreates() != 2 || fb.spec(rec.ID).Resources.MemoryMiB != 256 {
			t.Fatalf("other memory without an updater must be cold: creates %d", fb.nCreates())
		}
		// Env alone needs no updater.
		idle := idleIDs(m)
		rec, err = m.Create(context.Background(), "alice", sandbox.CreateRequest{Env: map[string]string{"X": "y"}})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(idle, rec.ID) {
			t.Fatalf("env-only create was not pooled: %s not in %v", rec.ID, idle)
		}
	})
	t.Run("update fails", func(t *testing.T) {
		fb := newFakeBackend(t)
		fb.failUpdate = true
		m, _, _ := newPoolManager(t, updBackend{fb}, 1)
		fb.mu.Lock()
		pooled := fb.creates[0].ID
		fb.mu.Unlock()
		rec, err := m.Create(context.Background(), "alice", sandbox.CreateRequest{Resources: sandbox.Resources{MemoryMiB: 256}})
		if err != nil {
			t.Fatal(err)
		}
		fb.mu.Lock()
		destroyed := slices.Contains(fb.destroys, pooled)
		fb.mu.Unlock()
		if rec.ID == pooled || !destroyed || fb.spec(rec.ID).Resources.MemoryMiB != 256 {
			t.Fatalf("failed hand-out: got %s, pooled %s destroyed %v", rec.ID, pooled, destroyed)
		}
		if _, err := m.store.Get(pooled); !errors.Is(err, sandbox.ErrNotFound) {
			t.Fatalf("record of the discarded pool sandbox: %v", err)
		}
		waitIdle(t, m, 1)
	})
}

// TestPoolable: every request field the pool does not know how to apply
// means a cold create, including fields added later.
func TestPoolable(t *testing.T) {
	applied := map[string]bool{"Template": true, "TimeoutSeconds": true, "Env": true, "Metadata": true,
		"Resources": true, "OnTimeout": true, "MaxCostMicros": true, "Idle": true}
	if !poolable(sandbox.CreateRequest{Template: "base", TimeoutSeconds: 5, Env: map[string]string{"a": "b"},
		Metadata: map[string]string{"a": "b"}, Resources: sandbox.Resources{MemoryMiB: 5}, OnTimeout: "pause", MaxCostMicros: 5}) {
		t.Fatal("applicable request refused")
	}
	typ := reflect.TypeFor[sandbox.CreateRequest]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		if applied[f.Name] {
			continue
		}
		var req sandbox.CreateRequest
		v := reflect.ValueOf(&req).Elem().Field(i)
		switch v.Kind() {
		case reflect.Pointer:
			v.Set(reflect.New(f.Type.Elem()))
		case reflect.Slice:
			v.Set(reflect.MakeSlice(f.Type, 1, 1))
		case reflect.Map:
			v.Set(reflect.MakeMap(f.Type))
		case reflect.String:
			v.SetString("x")
		case reflect.Bool:
			v.SetBool(true)
		case reflect.Int, reflect.Int64, reflect.Int32:
			v.SetInt(1)
		case reflect.Float64:
			v.SetFloat(1)
		default:
			t.Fatalf("field %s: kind %s not covered by this test", f.Name, v.Kind())
		}
		if poolable(req) {
			t.Errorf("request with %s set is poolable", f.Name)
		}
	}
}

func TestPoolReaper(t *testing.T) {
	fb := newFakeBackend(t)
	m, st, _ := newPoolManager(t, fb, 2)
	idle := func() []string { return idleIDs(m) }
	ids := idle()
	// A dead pool sandbox is recycled and replaced.
	fb.mu.Lock()
	fb.dead[ids[0]] = true
	fb.mu.Unlock()
	deadline := time.Now().Add(5 * time.Second)
	for slices.Contains(idle(), ids[0]) || len(idle()) != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("dead pool sandbox not replaced: %v", idle())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := st.Get(ids[0]); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("record of the recycled sandbox: %v", err)
	}
	// A lease running out is renewed, not expired.
	st.Update(ids[1], func(r *store.Record) error { r.ExpiresAt = time.Now().Add(-time.Second); return nil })
	deadline = time.Now().Add(5 * time.Second)
	for {
		r, err := st.Get(ids[1])
		if err != nil {
			t.Fatal(err)
		}
		if r.ExpiresAt.After(time.Now().Add(poolLease / 2)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("lease not renewed: %+v", r)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if !slices.Contains(idle(), ids[1]) || fb.nLive() != 2 {
		t.Fatalf("renewed sandbox left the pool: %v", idle())
	}
}

func TestPoolRecover(t *testing.T) {
	fb := newFakeBackend(t)
	m, st, stop := newPoolManager(t, fb, 2)
	user, err := m.Create(context.Background(), "alice", sandbox.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	waitIdle(t, m, 2)
	stop()
	// A pool create cut short by a crash.
	now := time.Now().UTC()
	half := &store.Record{ID: "sbhalf", Owner: poolOwner, Template: "base", State: sandbox.Creating, CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
	st.Put(half)
	fb.Create(context.Background(), sandbox.Spec{ID: half.ID, Template: "base"})

	m2 := New(m.cfg, Deps{Store: st, Backend: fb, Log: m.log})
	if err := m2.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	recs, _ := st.All()
	if len(recs) != 1 || recs[0].ID != user.ID {
		t.Fatalf("records after recover: %d", len(recs))
	}
	fb.mu.Lock()
	live := slices.Collect(func(yield func(string) bool) {
		for id := range fb.live {
			if !yield(id) {
				return
			}
		}
	})
	fb.mu.Unlock()
	if len(live) != 1 || live[0] != user.ID {
		t.Fatalf("live after recover: %v", live)
	}
}

// TestPoolOrphan: a running pool record in no idle list (say, one whose
// destroy failed during Recover) is destroyed once it is old enough.
func TestPoolOrphan(t *testing.T) {
	fb := newFakeBackend(t)
	m, st, _ := newPoolManager(t, fb, 1)
	then := time.Now().Add(-time.Hour).UTC()
	st.Put(&store.Record{ID: "sborphan", Owner: poolOwner, Template: "base", State: sandbox.Running, CreatedAt: then, ExpiresAt: time.Now().Add(time.Hour)})
	fb.Create(context.Background(), sandbox.Spec{ID: "sborphan", Template: "base"})
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := st.Get("sborphan")
		if errors.Is(err, sandbox.ErrNotFound) && fb.spec("sborphan").ID == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("orphan not destroyed: %v", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if len(idleIDs(m)) != 1 {
		t.Fatalf("pool: %v", idleIDs(m))
	}
}
