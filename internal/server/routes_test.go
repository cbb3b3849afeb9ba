package server

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/paddock-sandbox/paddock/api"
	"gopkg.in/yaml.v3"
)

// routeExceptions are the route table's patterns that are not operations of
// api/openapi.yaml, each with the reason.
var routeExceptions = map[string]string{
	"GET /metrics": "Prometheus metrics, outside /v1 and outside the API (docs/api.md)",
	"/v1/sandboxes/{id}/ports/{port}/{path...}": "the port proxy relays any method and path to a sandbox port; " +
		"documented with GET /v1/sandboxes/{id}/ports, not an operation of its own",
	"/":         "the JSON 404 for every path that is no route",
	"GET /{$}":  "the web console's page (package console, docs/console.md)",
	"/console/": "the web console: pages, sign-in and /console/v1/..., the API behind a session cookie (docs/console.md)",
}

// specOperations returns "METHOD /path" for every operation of the spec.
func specOperations(t *testing.T, doc []byte) map[string]bool {
	t.Helper()
	var spec struct {
		Paths map[string]map[string]any `yaml:"paths"`
	}
	if err := yaml.Unmarshal(doc, &spec); err != nil {
		t.Fatal(err)
	}
	ops := map[string]bool{}
	for path, item := range spec.Paths {
		for method := range item {
			switch method {
			case "get", "put", "post", "delete", "patch", "head", "options", "trace":
				ops[strings.ToUpper(method)+" "+path] = true
			}
		}
	}
	return ops
}

// tableOperations returns "METHOD /path" → ServeMux pattern for every entry
// of table that is not an exception.
func tableOperations(table []route) map[string]string {
	ops := map[string]string{}
	for _, rt := range table {
		if _, ok := routeExceptions[rt.pattern]; ok {
			continue
		}
		if method, path, ok := strings.Cut(rt.pattern, " "); ok {
			ops[method+" "+path] = rt.pattern
			continue
		}
		for _, m := range rt.methods {
			ops[m+" "+rt.pattern] = rt.pattern
		}
	}
	return ops
}

// routeProblems compares a route table, and the ServeMux built from it,
// with the operations of the spec, both ways.
func routeProblems(spec map[string]bool, table []route, mux *http.ServeMux) []string {
	var probs []string
	routed := tableOperations(table)
	for op := range routed {
		if !spec[op] {
			probs = append(probs, op+": routed but not in openapi.yaml")
		}
	}
	for _, rt := range table {
		if _, ok := routeExceptions[rt.pattern]; !ok && !strings.Contains(rt.pattern, " ") && len(rt.methods) == 0 {
			probs = append(probs, rt.pattern+": a pattern without a method needs methods or an exception")
		}
	}
	sample := strings.NewReplacer("{id}", "sb_1", "{process}", "p_1", "{name}", "n_1")
	for op := range spec {
		method, path, _ := strings.Cut(op, " ")
		_, pattern := mux.Handler(httptest.NewRequest(method, sample.Replace(path), nil))
		want, ok := routed[op]
		switch {
		case !ok:
			probs = append(probs, op+": in openapi.yaml but not in the route table")
		case pattern != want:
			probs = append(probs, op+": the router serves it with "+pattern+", want "+want)
		}
	}
	sort.Strings(probs)
	return probs
}

// routedServer is a Server with only its router built: enough to walk the
// routes without a manager behind them.
func routedServer(t *testing.T) *Server {
	t.Helper()
	s := &Server{mux: http.NewServeMux(), log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	s.routes()
	return s
}

// TestRoutesMatchSpec walks the real router's table and finds every route
// in api/openapi.yaml, and every operation of the spec on the real router.
func TestRoutesMatchSpec(t *testing.T) {
	s := routedServer(t)
	for _, p := range routeProblems(specOperations(t, api.OpenAPI), routeTable(), s.mux) {
		t.Error(p)
	}
	for pattern := range routeExceptions {
		if !slices.ContainsFunc(routeTable(), func(rt route) bool { return rt.pattern == pattern }) {
			t.Errorf("exception %q is not in the route table any more; remove it", pattern)
		}
	}
}

// TestRouteCheckCatchesOmissions drops a route from either side and
// expects routeProblems to report it.
func TestRouteCheckCatchesOmissions(t *testing.T) {
	s := routedServer(t)
	spec := specOperations(t, api.OpenAPI)

	t.Run("route missing from the table", func(t *testing.T) {
		var table []route
		for _, rt := range routeTable() {
			if rt.pattern != "GET /v1/sandboxes/{id}/files/stat" {
				table = append(table, rt)
			}
		}
		mux := http.NewServeMux()
		for _, rt := range table {
			mux.Handle(rt.pattern, rt.bind(s))
		}
		probs := routeProblems(spec, table, mux)
		if !slices.Contains(probs, "GET /v1/sandboxes/{id}/files/stat: in openapi.yaml but not in the route table") {
			t.Errorf("not reported; got %v", probs)
		}
	})
	t.Run("operation missing from the spec", func(t *testing.T) {
		fewer := map[string]bool{}
		for op := range spec {
			if op != "POST /v1/sandboxes/{id}/pause" {
				fewer[op] = true
			}
		}
		probs := routeProblems(fewer, routeTable(), s.mux)
		if !slices.Contains(probs, "POST /v1/sandboxes/{id}/pause: routed but not in openapi.yaml") {
			t.Errorf("not reported; got %v", probs)
		}
	})
}

// TestPassiveRoutesExist: every route exempted from the activity hook is
// a route of the table (a typo would make it count as activity).
func TestPassiveRoutesExist(t *testing.T) {
	patterns := map[string]bool{}
	for _, rt := range routeTable() {
		patterns[rt.pattern] = true
	}
	for p := range passive {
		if !patterns[p] {
			t.Errorf("passive route %q is not in the route table", p)
		}
	}
}
