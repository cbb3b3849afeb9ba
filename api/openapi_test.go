package api

import (
	"bytes"
	"fmt"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// The Go types and the error table are generated from openapi.yaml, so
// they cannot disagree with it (make check-generated keeps them current),
// and the route table of internal/server is checked against its paths
// there. The tests below check what generation does not: that the document
// is valid and consistent with itself. Each check returns a list of
// problems so that TestSpecChecksCatchOmissions can show that they report.

// loadSpec parses the embedded document into plain maps and slices.
func loadSpec(t *testing.T) map[string]any {
	t.Helper()
	var v any
	if err := yaml.Unmarshal(OpenAPI, &v); err != nil {
		t.Fatalf("openapi.yaml is not valid YAML: %v", err)
	}
	m, ok := normalize(v).(map[string]any)
	if !ok {
		t.Fatalf("openapi.yaml: top level is %T, want a mapping", v)
	}
	return m
}

// normalize turns map[any]any (non-string keys such as 200) into
// map[string]any, recursively.
func normalize(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			v[k] = normalize(e)
		}
		return v
	case map[any]any:
		m := make(map[string]any, len(v))
		for k, e := range v {
			m[fmt.Sprint(k)] = normalize(e)
		}
		return m
	case []any:
		for i, e := range v {
			v[i] = normalize(e)
		}
		return v
	}
	return v
}

func mapAt(v any, keys ...string) map[string]any {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	m, _ := v.(map[string]any)
	return m
}

// resolve follows a local $ref ("#/components/...") once.
func resolve(spec, v map[string]any) map[string]any {
	ref, ok := v["$ref"].(string)
	if !ok {
		return v
	}
	return mapAt(spec, strings.Split(strings.TrimPrefix(ref, "#/"), "/")...)
}

func stringSet(v any) []string {
	var out []string
	switch v := v.(type) {
	case string:
		out = []string{v}
	case []any:
		for _, e := range v {
			out = append(out, fmt.Sprint(e))
		}
	}
	sort.Strings(out)
	return out
}

var publicPaths = map[string]bool{"/v1/health": true, "/v1/openapi.yaml": true}

var httpMethods = []string{"get", "put", "post", "delete", "patch", "head", "options", "trace"}

// checkOperations checks every operation of paths: declared and required
// path parameters, security, error responses by reference, the 401 and 404
// every authenticated and per-sandbox route can answer, and empty 204s.
func checkOperations(spec map[string]any) []string {
	var probs []string
	bad := func(format string, args ...any) { probs = append(probs, fmt.Sprintf(format, args...)) }
	for path, item := range mapAt(spec, "paths") {
		im, _ := item.(map[string]any)
		for _, method := range httpMethods {
			op := mapAt(im, method)
			if op == nil {
				continue
			}
			key := strings.ToUpper(method) + " " + path
			params := map[string]map[string]any{} // "in name" → parameter
			for _, list := range []any{im["parameters"], op["parameters"]} {
				ps, _ := list.([]any)
				for _, p := range ps {
					pm := resolve(spec, mapAt(p))
					if pm == nil {
						bad("%s: unresolvable parameter %v", key, p)
						continue
					}
					params[fmt.Sprint(pm["in"], " ", pm["name"])] = pm
				}
			}
			for _, m := range regexp.MustCompile(`\{([^}]+)\}`).FindAllStringSubmatch(path, -1) {
				if p := params["path "+m[1]]; p == nil {
					bad("%s: path parameter %q missing", key, m[1])
				} else if p["required"] != true {
					bad("%s: path parameter %q is not required: true", key, m[1])
				}
			}
			sec, hasSec := op["security"]
			if publicPaths[path] {
				if l, ok := sec.([]any); !hasSec || !ok || len(l) != 0 {
					bad("%s: needs security: [] (no authentication)", key)
				}
			} else if hasSec && !strings.Contains(fmt.Sprint(sec), "bearerAuth") {
				bad("%s: security does not include bearerAuth", key)
			}
			responses := mapAt(op, "responses")
			for status, resp := range responses {
				code, err := strconv.Atoi(status)
				if err != nil {
					bad("%s: response %q is not a status", key, status)
					continue
				}
				if code == 204 && mapAt(resp, "content") != nil {
					bad("%s: 204 must have no content", key)
				}
				if ref, _ := mapAt(resp)["$ref"].(string); code >= 400 && !strings.HasPrefix(ref, "#/components/responses/") {
					bad("%s: error response %s should $ref a components/responses entry", key, status)
				}
			}
			if !publicPaths[path] && mapAt(responses, "401") == nil {
				bad("%s: 401 response missing", key)
			}
			if strings.Contains(path, "{id}") && mapAt(responses, "404") == nil {
				bad("%s: 404 response missing", key)
			}
		}
	}
	if s := mapAt(spec, "components", "securitySchemes", "bearerAuth"); s["type"] != "http" || s["scheme"] != "bearer" {
		bad("components.securitySchemes.bearerAuth should be type http, scheme bearer")
	}
	if !strings.Contains(fmt.Sprint(spec["security"]), "bearerAuth") {
		bad("top-level security should require bearerAuth")
	}
	return probs
}

// checkErrors checks the error table (x-error-codes on ErrorBody.code)
// against the code enum, and every error response of every operation
// against the status its example code travels with.
func checkErrors(spec map[string]any) []string {
	var probs []string
	bad := func(format string, args ...any) { probs = append(probs, fmt.Sprintf(format, args...)) }
	codeSchema := mapAt(spec, "components", "schemas", "ErrorBody", "properties", "code")
	status := map[string]string{}
	table, _ := codeSchema["x-error-codes"].([]any)
	seen := map[string]bool{}
	for _, row := range table {
		r := mapAt(row)
		code, _ := r["code"].(string)
		st := fmt.Sprint(r["status"])
		if seen[st] {
			bad("x-error-codes: status %s travels with two codes", st)
		}
		seen[st] = true
		status[code] = st
	}
	var codes []string
	for c := range status {
		codes = append(codes, c)
	}
	sort.Strings(codes)
	if got := stringSet(codeSchema["enum"]); !slices.Equal(got, codes) {
		bad("ErrorBody.code: enum is %v, x-error-codes has %v", got, codes)
	}
	covered := map[string]bool{}
	for path, item := range mapAt(spec, "paths") {
		for method, op := range mapAt(item) {
			for st, resp := range mapAt(op, "responses") {
				if code, err := strconv.Atoi(st); err != nil || code < 400 {
					continue
				}
				r := resolve(spec, mapAt(resp))
				code, _ := mapAt(r, "content", "application/json", "example", "error")["code"].(string)
				if mapAt(r, "content", "application/json", "schema")["$ref"] != "#/components/schemas/ErrorResponse" {
					bad("%s %s: response %s is not an ErrorResponse", method, path, st)
				}
				if status[code] != st {
					bad("%s %s: response %s has example code %q, which travels with %q", method, path, st, code, status[code])
				}
				covered[code] = true
			}
		}
	}
	for code := range status {
		if !covered[code] {
			bad("error code %q is used by no operation", code)
		}
	}
	return probs
}

// checkEnums checks the enums that repeat another: the state filter is the
// sandbox states plus "all".
func checkEnums(spec map[string]any) []string {
	states := stringSet(mapAt(spec, "components", "schemas", "Sandbox", "properties", "state")["enum"])
	want := append(slices.Clone(states), "all")
	sort.Strings(want)
	filter := resolve(spec, mapAt(spec, "components", "parameters", "StateFilter", "schema"))
	if got := stringSet(filter["enum"]); !slices.Equal(got, want) {
		return []string{fmt.Sprintf("parameter state: enum is %v, want %v", got, want)}
	}
	return nil
}

// checkRefs reports every local $ref that does not resolve.
func checkRefs(spec map[string]any) []string {
	var probs []string
	var walk func(v any, at string)
	walk = func(v any, at string) {
		switch v := v.(type) {
		case map[string]any:
			if ref, ok := v["$ref"].(string); ok {
				if !strings.HasPrefix(ref, "#/") || resolve(spec, v) == nil {
					probs = append(probs, fmt.Sprintf("%s: $ref %q does not resolve", at, ref))
				}
			}
			for k, e := range v {
				walk(e, at+"/"+k)
			}
		case []any:
			for i, e := range v {
				walk(e, fmt.Sprintf("%s/%d", at, i))
			}
		}
	}
	walk(spec, "#")
	return probs
}

func report(t *testing.T, probs []string) {
	t.Helper()
	sort.Strings(probs)
	for _, p := range probs {
		t.Error(p)
	}
}

func TestOpenAPIEmbedded(t *testing.T) {
	disk, err := os.ReadFile("openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(disk, OpenAPI) {
		t.Error("OpenAPI differs from openapi.yaml")
	}
	spec := loadSpec(t)
	if v, _ := spec["openapi"].(string); !strings.HasPrefix(v, "3.1.") {
		t.Errorf("openapi is %q, want 3.1.x", spec["openapi"])
	}
	if v := mapAt(spec, "info")["version"]; v != Version {
		t.Errorf("info.version is %v, want %q", v, Version)
	}
	report(t, checkRefs(spec))
}

func TestSpecOperations(t *testing.T) { report(t, checkOperations(loadSpec(t))) }
func TestSpecErrors(t *testing.T)     { report(t, checkErrors(loadSpec(t))) }
func TestSpecEnums(t *testing.T)      { report(t, checkEnums(loadSpec(t))) }

// TestSpecChecksCatchOmissions removes pieces from a parsed copy of the
// document and expects the checks to notice.
func TestSpecChecksCatchOmissions(t *testing.T) {
	for _, c := range []struct {
		name   string
		mutate func(spec map[string]any)
		check  func(spec map[string]any) []string
		want   string
	}{
		{
			"path parameter", func(s map[string]any) { delete(mapAt(s, "paths", "/v1/secrets/{name}"), "parameters") },
			checkOperations, `"name" missing`,
		},
		{
			"401", func(s map[string]any) {
				delete(mapAt(s, "paths", "/v1/sandboxes/{id}/files/stat", "get", "responses"), "401")
			},
			checkOperations, "GET /v1/sandboxes/{id}/files/stat: 401",
		},
		{
			"error code row", func(s map[string]any) {
				p := mapAt(s, "components", "schemas", "ErrorBody", "properties", "code")
				p["x-error-codes"] = p["x-error-codes"].([]any)[1:]
			},
			checkErrors, "bad_request",
		},
		{
			"status of a response", func(s map[string]any) {
				r := mapAt(s, "paths", "/v1/sandboxes/{id}", "get", "responses")
				r["400"] = r["404"]
			},
			checkErrors, `response 400 has example code "not_found"`,
		},
		{
			"state filter", func(s map[string]any) {
				p := mapAt(s, "components", "parameters", "StateFilter", "schema")
				p["enum"] = p["enum"].([]any)[1:]
			},
			checkEnums, "parameter state",
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			spec := loadSpec(t)
			if p := c.check(spec); len(p) != 0 {
				t.Fatalf("unmodified document already has problems: %v", p)
			}
			c.mutate(spec)
			probs := c.check(spec)
			if !slices.ContainsFunc(probs, func(p string) bool { return strings.Contains(p, c.want) }) {
				t.Errorf("removing a %s was not reported (want a problem mentioning %s); got %v", c.name, c.want, probs)
			}
		})
	}
}

// TestErrorTable checks that each code and its status find each other.
func TestErrorTable(t *testing.T) {
	for _, code := range ErrorCodes() {
		if !KnownCode(code) {
			t.Errorf("KnownCode(%q) is false", code)
		}
		if got := CodeOf(StatusOf(code)); got != code {
			t.Errorf("CodeOf(StatusOf(%q)) = %q", code, got)
		}
	}
	for _, c := range []struct {
		status int
		code   string
	}{{403, CodeUnauthorized}, {504, CodeUnavailable}, {599, CodeInternal}, {418, ""}, {200, ""}} {
		if got := CodeOf(c.status); got != c.code {
			t.Errorf("CodeOf(%d) = %q, want %q", c.status, got, c.code)
		}
	}
	if KnownCode("teapot") || StatusOf("teapot") != 500 {
		t.Error("an unknown code should be unknown and travel with 500")
	}
}
