package integration

import (
	"errors"
	"path"
	"strings"
	"testing"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/client"
)

func TestFileWatch(t *testing.T) {
	ctx := ctxT(t)
	sb := newSandbox(t, nil)
	run := func(t *testing.T, cmd string) {
		t.Helper()
		res, err := sb.Exec(ctx, api.ExecRequest{Command: cmd})
		if err != nil || res.ExitCode == nil || *res.ExitCode != 0 {
			t.Fatalf("%s: %+v %v", cmd, res, err)
		}
	}
	run(t, "mkdir -p w w2")

	t.Run("create, write, rename, remove", func(t *testing.T) {
		w, err := sb.Watch(ctx, "w", true)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		run(t, "touch w/a && echo hi >> w/a && mv w/a w/b && mkdir w/d && touch w/d/e && rm w/b")
		want := []api.WatchEvent{
			{Type: api.WatchCreate, Path: "/workspace/w/a"},
			{Type: api.WatchWrite, Path: "/workspace/w/a"},
			{Type: api.WatchRename, Path: "/workspace/w/b", OldPath: "/workspace/w/a"},
			{Type: api.WatchCreate, Path: "/workspace/w/d", IsDir: true},
			{Type: api.WatchCreate, Path: "/workspace/w/d/e"},
			{Type: api.WatchRemove, Path: "/workspace/w/b"},
		}
		var last api.WatchEvent
		for _, wnt := range want {
			ev, err := w.Next()
			if err != nil {
				t.Fatal(err)
			}
			ev.Time = nil
			for ev == last {
				ev, _ = w.Next()
				ev.Time = nil
			}
			last = ev
			if ev != wnt {
				t.Fatalf("got %+v, want %+v", ev, wnt)
			}
		}
	})

	t.Run("overflow is bounded", func(t *testing.T) {
		w, err := sb.Watch(ctx, "w2", false)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		// Not reading while 20000 files with long names appear: far more
		// than the queue and the sockets hold.
		const n = 20000
		run(t, `python3 -c "
for i in range(20000): open('w2/' + 'x'*200 + str(i), 'w').close()"`)
		creates, overflows := 0, 0
		for {
			ev, err := w.Next()
			if err != nil {
				t.Fatal(err)
			}
			if strings.HasPrefix(path.Base(ev.Path), "marker") && ev.Type == api.WatchCreate {
				break
			}
			if ev.Type != api.WatchOverflow {
				creates++
				continue
			}
			overflows++ // reading now: a marker made after this gets through
			run(t, "touch w2/marker && rm w2/marker")
		}
		if overflows == 0 || creates >= n {
			t.Fatalf("%d creates and %d overflows for %d files", creates, overflows, n)
		}
		t.Logf("%d files: %d create events, %d overflow events", n, creates, overflows)
	})

	t.Run("watch limit", func(t *testing.T) {
		sb := newSandbox(t, nil) // the watches above may still be closing
		for i := 0; i < 8; i++ {
			w, err := sb.Watch(ctx, ".", false)
			if err != nil {
				t.Fatalf("watch %d: %v", i, err)
			}
			defer w.Close()
		}
		if _, err := sb.Watch(ctx, ".", false); !errors.Is(err, client.ErrLimitExceeded) {
			t.Fatalf("9th watch: %v, want limit_exceeded", err)
		}
	})

	t.Run("bad paths", func(t *testing.T) {
		run(t, "touch plain")
		for p, want := range map[string]error{"missing": client.ErrNotFound, "plain": client.ErrBadRequest} {
			if _, err := sb.Watch(ctx, p, false); !errors.Is(err, want) {
				t.Errorf("watch %s: %v, want %v", p, err, want)
			}
		}
	})
}
