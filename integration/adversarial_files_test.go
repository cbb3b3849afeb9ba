package integration

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/api"
)

// advSwapper runs inside the sandbox: it swaps /workspace/race between a
// regular file, hard links and symlinks to host-looking paths, and
// /workspace/rd between a directory and symlinks to /, /root, /tmp, /etc,
// as fast as it can, until killed.
const advSwapper = `import os, sys
marker = sys.argv[1]
os.makedirs("/workspace/real", exist_ok=True)
with open("/etc/shadow", "w") as f:
    f.write("SANDBOX-SHADOW\n")
with open("/workspace/plain", "w") as f:
    f.write("SANDBOX-OK\n")
up = "../" * 12
links = ["/etc/shadow", up + "etc/shadow", "/tmp/" + marker, up + "tmp/" + marker, "/root/" + marker,
         up + "root/" + marker, "/" + marker, "/proc/1/root/etc/shadow", "/proc/self/root/" + up + "etc/shadow",
         "/proc/1/cwd/" + marker]
dirs = ["/", "/root", "/tmp", "/etc", up, "/proc/1/root", "/workspace/real"]
hard = ["/workspace/plain", "/etc/passwd", "/etc/os-release", "/usr/bin/bash"]
i = 0
while True:
    i += 1
    tmp = "/workspace/.swap%d" % (i % 2)
    try:
        os.unlink(tmp)
    except OSError:
        pass
    try:
        k = i % (len(links) + len(hard))
        if k < len(links):
            os.symlink(links[k], tmp)
        else:
            os.link(hard[k - len(links)], tmp)
        os.replace(tmp, "/workspace/race")
    except OSError:
        pass
    try:
        if i % 2:
            os.symlink(dirs[(i // 2) % len(dirs)], "/workspace/.rd")
            os.replace("/workspace/.rd", "/workspace/rd")
        else:
            if os.path.islink("/workspace/rd"):
                os.unlink("/workspace/rd")
            os.makedirs("/workspace/rd", exist_ok=True)
    except OSError:
        pass
`

// TestAdversarialSymlinkRace hammers GET and PUT /files on paths that a
// process inside the sandbox keeps swapping between regular files, hard
// links and symlinks (absolute, ../-relative and /proc-based) aimed at the
// host's /etc/shadow and at decoy files the test writes on the host. Every
// read must return sandbox content, and no write may land on the host.
func TestAdversarialSymlinkRace(t *testing.T) {
	ctx := ctxT(t)
	marker := advMarker("paddock-adv-race")
	secret := advMarker("HOST-SECRET")
	decoys := advHostDecoys(t, secret, "/tmp/"+marker, "/root/"+marker, "/"+marker)
	shadowSum := advSHA256("/etc/shadow")
	shadow, _ := os.ReadFile("/etc/shadow")
	putName := advMarker("paddock-adv-put")

	sb := newSandbox(t, nil)
	if _, err := sb.Files().Write(ctx, "advSwapper.py", []byte(advSwapper), 0); err != nil {
		t.Fatal(err)
	}
	p, err := sb.Start(ctx, api.ExecRequest{Argv: []string{"python3", "advSwapper.py", marker}, TimeoutSeconds: 120})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)

	// Sandbox content a read may legitimately return.
	passwd, _ := sb.Files().Read(ctx, "/etc/passwd")
	osRelease, _ := sb.Files().Read(ctx, "/etc/os-release")
	okBody := func(b []byte) bool {
		s := string(b)
		return s == "SANDBOX-OK\n" || s == "SANDBOX-SHADOW\n" || bytes.Equal(b, passwd) || bytes.Equal(b, osRelease) ||
			strings.HasPrefix(s, "PUT ") || strings.HasPrefix(s, "\x7fELF")
	}
	hostContent := func(b []byte) bool {
		return bytes.Contains(b, []byte(secret)) || (len(shadow) > 0 && bytes.Contains(b, shadow[:min(len(shadow), 64)]))
	}

	var (
		mu       sync.Mutex
		statuses = map[string]int{}
		bad      []string
		reads    atomic.Int64
	)
	note := func(kind string, status int, body []byte) {
		mu.Lock()
		defer mu.Unlock()
		statuses[fmt.Sprintf("%s %d", kind, status)]++
		switch {
		case hostContent(body):
			bad = append(bad, fmt.Sprintf("%s returned host content: %.100q", kind, body))
		case status >= 500:
			bad = append(bad, fmt.Sprintf("%s: %d %.200q", kind, status, body))
		case kind == "GET" && status == 200 && !okBody(body):
			bad = append(bad, fmt.Sprintf("GET returned unexpected content: %.100q", body))
		}
	}
	do := func(ctx context.Context, method, path string, body []byte) (int, []byte, error) {
		u := shared.url + "/v1/sandboxes/" + sb.ID + "/files" + path
		req, _ := http.NewRequestWithContext(ctx, method, u, bytes.NewReader(body))
		if body == nil {
			req.Body = nil
		}
		req.Header.Set("Authorization", "Bearer "+shared.keys[0])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, nil, err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return resp.StatusCode, b, nil
	}
	q := func(p string) string { return "?path=" + url.QueryEscape(p) }
	worst := advProbe(t, func() {
		hctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		var wg sync.WaitGroup
		workers := []func(i int){
			func(int) {
				st, b, err := do(hctx, "GET", q("/workspace/race"), nil)
				if err == nil {
					note("GET", st, b)
				}
			},
			func(int) {
				st, b, err := do(hctx, "GET", q("/workspace/rd/"+marker), nil)
				if err == nil {
					note("GET", st, b)
				}
			},
			func(int) {
				st, b, err := do(hctx, "GET", q("/workspace/rd/shadow"), nil)
				if err == nil {
					note("GET", st, b)
				}
			},
			func(i int) {
				st, b, err := do(hctx, "PUT", q("/workspace/race"), []byte(fmt.Sprintf("PUT %d\n", i)))
				if err == nil {
					note("PUT", st, b)
				}
			},
			func(i int) {
				st, b, err := do(hctx, "PUT", q("/workspace/rd/"+putName), []byte(fmt.Sprintf("PUT %d\n", i)))
				if err == nil {
					note("PUT", st, b)
				}
			},
			func(i int) {
				st, b, err := do(hctx, "PUT", q("/workspace/rd/"+marker), []byte(fmt.Sprintf("PUT %d\n", i)))
				if err == nil {
					note("PUT", st, b)
				}
			},
			func(int) {
				for _, ep := range []string{"/stat", "/list"} {
					st, b, err := do(hctx, "GET", ep+q("/workspace/rd")+"&depth=2", nil)
					if ep == "/stat" {
						st, b, err = do(hctx, "GET", ep+q("/workspace/race"), nil)
					}
					if err == nil {
						note("GET"+ep, st, b)
					}
				}
			},
			func(int) {
				st, b, err := do(hctx, "DELETE", q("/workspace/rd/"+marker), nil)
				if err == nil {
					note("DELETE", st, b)
				}
			},
		}
		for _, w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; hctx.Err() == nil; i++ {
					w(i)
					reads.Add(1)
				}
			}()
		}
		wg.Wait()
	})
	p.Kill(ctx)
	for _, b := range bad[:min(len(bad), 20)] {
		t.Error(b)
	}
	for _, d := range decoys {
		if b, err := os.ReadFile(d); err != nil || string(b) != secret {
			t.Errorf("host decoy %s changed: %q %v", d, b, err)
		}
	}
	if advSHA256("/etc/shadow") != shadowSum {
		t.Errorf("host /etc/shadow changed")
	}
	if found := advSearchHost(putName, shared.stateDir); len(found) > 0 {
		t.Errorf("a PUT through a swapped symlink landed on the host: %v", found)
	}
	if st := statuses["GET 200"]; st == 0 {
		t.Errorf("no read succeeded during the race: %v", statuses)
	}
	t.Logf("%d requests in 3 s: %v; worst other-tenant latency %v", reads.Load(), statuses, worst)
}
