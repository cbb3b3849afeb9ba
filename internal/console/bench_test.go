package console

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// BenchmarkForward measures what the console adds to an API call: the
// session lookup, the checks and the request clone (the API is a no-op).
func BenchmarkForward(b *testing.B) {
	now := time.Unix(1e9, 0)
	h := New(Config{
		Lookup: func(s string) (string, bool) { return "key_a", true },
		API:    http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}),
		Now:    func() time.Time { return now },
	})
	id, x, _ := h.sessions.create("key_a", "pdk_a")
	c := &http.Cookie{Name: CookieName, Value: id}
	b.ReportAllocs()
	for b.Loop() {
		req := httptest.NewRequest("POST", "http://paddock.test/console/v1/sandboxes/sb_1/pause", nil)
		req.AddCookie(c)
		req.Header.Set(CSRFHeader, x.csrf)
		req.Header.Set("Origin", "http://paddock.test")
		h.ServeHTTP(httptest.NewRecorder(), req)
	}
}
