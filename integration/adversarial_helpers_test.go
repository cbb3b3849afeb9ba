package integration

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/client"
)

// Helpers of the adversarial suite (adversarial_*_test.go). Everything
// hostile runs inside sandboxes through the API; the host side only
// observes (hashes, RSS, file searches) and serves decoys.

// advMarker returns a name no file on the host carries by accident.
func advMarker(prefix string) string {
	b := make([]byte, 8)
	rand.Read(b)
	return prefix + "-" + hex.EncodeToString(b)
}

// advRSS is the resident set size of process pid in KiB (0 if unknown).
func advRSS(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			n, _ := strconv.ParseInt(f[1], 10, 64)
			return n
		}
	}
	return 0
}

// advDaemonRSS is the shared daemon's resident set size in KiB.
func advDaemonRSS() int64 { return advRSS(shared.cmd.Process.Pid) }

// advSHA256 hashes a host file ("" if it cannot be read).
func advSHA256(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return ""
	}
	return hex.EncodeToString(h.Sum(nil))
}

// advExec runs a shell command in sb and fails the test on an API error
// (a non-zero exit is a result the caller inspects).
func advExec(t *testing.T, sb *client.Sandbox, command string, timeout float64) *api.ExecResult {
	t.Helper()
	res, err := sb.Exec(ctxT(t), api.ExecRequest{Command: command, TimeoutSeconds: timeout, MaxOutputBytes: 1 << 20})
	if err != nil {
		t.Fatalf("exec %q: %v", command, err)
	}
	return res
}

// advRequest sends a raw request to the shared daemon with alice's key and
// returns the status and (at most 16 MiB of) the body.
func advRequest(t *testing.T, method, path string, body io.Reader, hdr map[string]string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctxT(t), method, shared.url+path, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+shared.keys[0])
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	// A fresh connection per request, so header limits apply exactly (a
	// reused connection may hold a few KiB of the next request already).
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	return resp.StatusCode, b
}

// advWantAPIError checks that an answer is a 4xx with a JSON error body.
func advWantAPIError(t *testing.T, what string, status int, body []byte) {
	t.Helper()
	var e api.ErrorResponse
	if status < 400 || status > 499 || json.Unmarshal(body, &e) != nil || e.Error.Code == "" || e.Error.Message == "" {
		t.Errorf("%s: got %d %.300q, want a 4xx JSON error", what, status, body)
	}
}

// advProbe runs f while probeDaemon measures another tenant's latency;
// when f ends before the first probe, the daemon is still checked once.
func advProbe(t *testing.T, f func()) time.Duration {
	t.Helper()
	worst := probeDaemon(t, f)
	if worst == 0 {
		start := time.Now()
		advDaemonAnswers(t)
		worst = time.Since(start)
	}
	return worst
}

// advDaemonAnswers fails the test unless the shared daemon answers health
// within a few seconds.
func advDaemonAnswers(t *testing.T) {
	t.Helper()
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(shared.url + "/v1/health")
	if err != nil {
		t.Fatalf("daemon stopped answering: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("daemon health: %d", resp.StatusCode)
	}
}

// advHostSearchRoots are where a file escaping a sandbox would plausibly land.
var advHostSearchRoots = []string{"/etc", "/root", "/home", "/tmp", "/var", "/usr", "/work", "/opt", "/srv", "/run", "/media", "/boot"}

// advSearchHost looks for files named name on the host: directly under /, and
// anywhere below advHostSearchRoots, skipping the directories in skip (the
// daemon's own state directory, where a sandbox's files legitimately live).
// Mount points are crossed; symlinks are not followed.
func advSearchHost(name string, skip ...string) []string {
	var found []string
	if _, err := os.Lstat(filepath.Join("/", name)); err == nil {
		found = append(found, filepath.Join("/", name))
	}
	skipped := func(p string) bool {
		for _, s := range skip {
			if p == s || strings.HasPrefix(p, s+"/") {
				return true
			}
		}
		return false
	}
	for _, root := range advHostSearchRoots {
		filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				if d != nil && d.IsDir() {
					return fs.SkipDir
				}
				return nil
			}
			if d.IsDir() && skipped(p) {
				return fs.SkipDir
			}
			if d.Name() == name {
				found = append(found, p)
			}
			return nil
		})
	}
	return found
}

// advHostDecoys writes decoy files on the host that no sandbox may ever read
// or change, and removes them when the test ends. It returns their paths.
func advHostDecoys(t *testing.T, content string, paths ...string) []string {
	t.Helper()
	for _, p := range paths {
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Remove(p) })
	}
	return paths
}
