package e2b

import (
	"strconv"
	"sync"
)

// maxTags bounds the process tags kept in memory (StartRequest.tag);
// past it new tags are not kept and selecting by them finds nothing.
const maxTags = 4096

// tagTable maps (sandbox, pid) to the tag a process was started with.
// Tags live in memory only: after a daemon restart processes are found by
// pid.
type tagTable struct {
	mu sync.Mutex
	m  map[string]string // "<sandbox>/<pid>" -> tag
}

func tagKey(id string, pid int) string { return id + "/" + strconv.Itoa(pid) }

func (t *tagTable) set(id string, pid int, tag string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = map[string]string{}
	}
	if len(t.m) < maxTags {
		t.m[tagKey(id, pid)] = tag
	}
}

func (t *tagTable) tag(id string, pid int) (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	tag, ok := t.m[tagKey(id, pid)]
	return tag, ok
}

func (t *tagTable) pid(id, tag string) (int, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, v := range t.m {
		if v != tag {
			continue
		}
		if sid, p, ok := cutLast(k, '/'); ok && sid == id {
			if n, err := strconv.Atoi(p); err == nil {
				return n, true
			}
		}
	}
	return 0, false
}

func cutLast(s string, sep byte) (string, string, bool) {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == sep {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}
