package api

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// The tests below keep openapi.yaml in step with the Go sources of this
// package: the route table in the doc comment of routes.go, the structs and
// constants of api.go. Each check returns a list of problems so that
// TestSpecChecksCatchOmissions can show that a missing route or field is
// reported.

// wireTypes maps the name of every struct declared in api.go to its type.
// TestSpecSchemas fails when api.go declares a struct missing here.
var wireTypes = map[string]reflect.Type{}

func init() {
	for _, v := range []any{
		Resources{}, CreateSandboxRequest{}, Sandbox{}, Metrics{}, Usage{}, ListSandboxesResponse{},
		SetTimeoutRequest{}, ExecRequest{}, ExecResult{}, Event{}, Process{},
		ListProcessesResponse{}, SignalRequest{}, FileEntry{}, ListFilesResponse{},
		ErrorResponse{}, ErrorBody{}, Health{}, Port{}, ListPortsResponse{},
		Template{}, ListTemplatesResponse{}, TemplateSource{}, CreateTemplateRequest{}, Recipe{},
		RecipeStep{}, CopyStep{}, BuildEvent{}, SnapshotRequest{},
		NetworkPolicy{}, CreateSecretRequest{}, Secret{}, ListSecretsResponse{},
	} {
		t := reflect.TypeOf(v)
		wireTypes[t.Name()] = t
	}
}

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

// route is one line of the route table in routes.go.
type route struct {
	method, path string
	query        []string // query parameter names
	request      string   // left of →: a type name, "raw body" or ""
	status       string   // success status, "200" unless the line says
	response     string   // right of → after the status
}

var routeLine = regexp.MustCompile(`^//\s+(GET|POST|PUT|PATCH|DELETE)\s+(/\S*)\s*(.*)$`)

func parseRoutes(t *testing.T) []route {
	t.Helper()
	src, err := os.ReadFile("routes.go")
	if err != nil {
		t.Fatal(err)
	}
	var routes []route
	for _, line := range strings.Split(string(src), "\n") {
		m := routeLine.FindStringSubmatch(strings.TrimSpace(line))
		if m == nil {
			continue
		}
		r := route{method: m[1], path: m[2], status: "200"}
		if p, q, ok := strings.Cut(r.path, "?"); ok {
			r.path = p
			for _, kv := range strings.Split(q, "&") {
				name, _, _ := strings.Cut(kv, "=")
				name, _, _ = strings.Cut(name, ".") // metadata.K → metadata
				r.query = append(r.query, name)
			}
		}
		left, right, ok := strings.Cut(m[3], "→")
		if !ok {
			t.Fatalf("routes.go: route line without →: %q", line)
		}
		r.request = strings.TrimSpace(left)
		right = strings.TrimSpace(right)
		if f := strings.Fields(right); len(f) > 0 && regexp.MustCompile(`^\d{3}$`).MatchString(f[0]) {
			r.status = f[0]
			right = strings.TrimSpace(strings.TrimPrefix(right, f[0]))
		}
		r.response = right
		routes = append(routes, r)
	}
	if len(routes) == 0 {
		t.Fatal("routes.go: no routes found in the route table")
	}
	return routes
}

var publicPaths = map[string]bool{"/v1/health": true, "/v1/openapi.yaml": true}

// checkRoutes compares the paths of the document with the route table.
func checkRoutes(spec map[string]any, routes []route) []string {
	var probs []string
	bad := func(format string, args ...any) { probs = append(probs, fmt.Sprintf(format, args...)) }

	paths := mapAt(spec, "paths")
	inTable := map[string]bool{}
	for _, r := range routes {
		key := r.method + " " + r.path
		inTable[key] = true
		item := mapAt(paths, r.path)
		if item == nil {
			bad("%s: path missing under paths:", key)
			continue
		}
		op := mapAt(item, strings.ToLower(r.method))
		if op == nil {
			bad("%s: operation missing", key)
			continue
		}

		// Parameters of the path item and the operation, resolved.
		params := map[string]map[string]any{} // "in name" → parameter
		for _, list := range []any{item["parameters"], op["parameters"]} {
			ps, _ := list.([]any)
			for _, p := range ps {
				pm, _ := p.(map[string]any)
				pm = resolve(spec, pm)
				if pm == nil {
					bad("%s: unresolvable parameter %v", key, p)
					continue
				}
				params[fmt.Sprint(pm["in"], " ", pm["name"])] = pm
			}
		}
		for _, q := range r.query {
			if params["query "+q] == nil {
				bad("%s: query parameter %q missing", key, q)
			}
		}
		for _, m := range regexp.MustCompile(`\{([^}]+)\}`).FindAllStringSubmatch(r.path, -1) {
			p := params["path "+m[1]]
			if p == nil {
				bad("%s: path parameter %q missing", key, m[1])
			} else if p["required"] != true {
				bad("%s: path parameter %q is not required: true", key, m[1])
			}
		}

		// Security: bearer everywhere but the public paths.
		sec, hasSec := op["security"]
		if publicPaths[r.path] {
			if l, ok := sec.([]any); !hasSec || !ok || len(l) != 0 {
				bad("%s: needs security: [] (no authentication)", key)
			}
		} else if hasSec {
			if !strings.Contains(fmt.Sprint(sec), "bearerAuth") {
				bad("%s: security does not include bearerAuth", key)
			}
		}

		// Request body.
		switch {
		case r.request == "raw body":
			if mapAt(op, "requestBody", "content", "application/octet-stream") == nil {
				bad("%s: request body should be application/octet-stream", key)
			}
		case wireTypes[r.request] != nil:
			if got := mapAt(op, "requestBody", "content", "application/json", "schema")["$ref"]; got != "#/components/schemas/"+r.request {
				bad("%s: request body schema is %v, want %s", key, got, r.request)
			}
		case r.request != "":
			bad("%s: cannot read request %q in routes.go", key, r.request)
		}

		// Responses.
		responses := mapAt(op, "responses")
		ok := mapAt(responses, r.status)
		if ok == nil {
			bad("%s: success response %s missing", key, r.status)
		}
		content := mapAt(ok, "content")
		if f := strings.Fields(r.response); len(f) > 0 {
			if name := strings.TrimRight(f[0], ",.;:"); wireTypes[name] != nil {
				if got := mapAt(content, "application/json", "schema")["$ref"]; got != "#/components/schemas/"+name {
					bad("%s: %s application/json schema is %v, want %s", key, r.status, got, name)
				}
			}
		}
		if strings.Contains(r.response, "NDJSON") {
			if got := mapAt(content, ContentTypeNDJSON, "schema")["$ref"]; got != "#/components/schemas/Event" {
				bad("%s: %s should offer %s with schema Event, has %v", key, r.status, ContentTypeNDJSON, got)
			}
		}
		if strings.Contains(r.response, "raw bytes") && mapAt(content, "application/octet-stream") == nil {
			bad("%s: %s should be application/octet-stream", key, r.status)
		}
		if r.status == "204" && content != nil {
			bad("%s: 204 must have no content", key)
		}
		for status, resp := range responses {
			code, err := strconv.Atoi(status)
			if err != nil || code < 400 {
				continue
			}
			rm, _ := resp.(map[string]any)
			ref, _ := rm["$ref"].(string)
			if !strings.HasPrefix(ref, "#/components/responses/") {
				bad("%s: error response %s should $ref a components/responses entry", key, status)
			}
		}
		if !publicPaths[r.path] && mapAt(responses, "401") == nil {
			bad("%s: 401 response missing", key)
		}
		if strings.Contains(r.path, "{id}") && mapAt(responses, "404") == nil {
			bad("%s: 404 response missing", key)
		}
	}

	// No operation that the route table does not have.
	for path, item := range paths {
		im, _ := item.(map[string]any)
		for method := range im {
			switch method {
			case "get", "put", "post", "delete", "patch", "head", "options", "trace":
				if !inTable[strings.ToUpper(method)+" "+path] {
					bad("%s %s: in openapi.yaml but not in routes.go", strings.ToUpper(method), path)
				}
			}
		}
	}

	// The bearer scheme.
	if s := mapAt(spec, "components", "securitySchemes", "bearerAuth"); s["type"] != "http" || s["scheme"] != "bearer" {
		bad("components.securitySchemes.bearerAuth should be type http, scheme bearer")
	}
	if !strings.Contains(fmt.Sprint(spec["security"]), "bearerAuth") {
		bad("top-level security should require bearerAuth")
	}
	return probs
}

// field is one JSON field of a wire struct, embedded structs flattened the
// way encoding/json does.
type field struct {
	name      string
	typ       reflect.Type
	omitempty bool
	optional  bool // comes from an embedded pointer, absent when it is nil
}

func jsonFields(t reflect.Type, optional bool) []field {
	var out []field
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			et := f.Type
			if et.Kind() == reflect.Pointer {
				out = append(out, jsonFields(et.Elem(), true)...)
			} else {
				out = append(out, jsonFields(et, optional)...)
			}
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, field{name, f.Type, slices.Contains(strings.Split(opts, ","), "omitempty"), optional})
	}
	return out
}

var timeType = reflect.TypeOf(time.Time{})

// checkType compares one property schema with a Go type. A pointer without
// omitempty is encoded as null when nil, so it must be nullable; nothing
// else may be.
func checkType(s map[string]any, t reflect.Type, nullable bool) string {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	want := func(typ string, extra ...string) string {
		types := []string{typ}
		if nullable {
			types = append(types, "null")
		}
		sort.Strings(types)
		if got := stringSet(s["type"]); !slices.Equal(got, types) {
			return fmt.Sprintf("type is %v, want %v", got, types)
		}
		for i := 0; i+1 < len(extra); i += 2 {
			if s[extra[i]] != extra[i+1] {
				return fmt.Sprintf("%s is %v, want %s", extra[i], s[extra[i]], extra[i+1])
			}
		}
		return ""
	}
	switch {
	case t == timeType:
		return want("string", "format", "date-time")
	case t.Kind() == reflect.Struct:
		if nullable {
			return "nullable struct references are not supported by this test"
		}
		if got := s["$ref"]; got != "#/components/schemas/"+t.Name() {
			return fmt.Sprintf("$ref is %v, want #/components/schemas/%s", got, t.Name())
		}
		return ""
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8:
		return want("string", "contentEncoding", "base64")
	case t.Kind() == reflect.Slice:
		if p := want("array"); p != "" {
			return p
		}
		items, _ := s["items"].(map[string]any)
		if p := checkType(items, t.Elem(), false); p != "" {
			return "items: " + p
		}
		return ""
	case t.Kind() == reflect.Map:
		if p := want("object"); p != "" {
			return p
		}
		ap, _ := s["additionalProperties"].(map[string]any)
		if p := checkType(ap, t.Elem(), false); p != "" {
			return "additionalProperties: " + p
		}
		return ""
	case t.Kind() == reflect.String:
		return want("string")
	case t.Kind() == reflect.Bool:
		return want("boolean")
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Uint64:
		return want("integer")
	case t.Kind() == reflect.Float32 || t.Kind() == reflect.Float64:
		return want("number")
	}
	return fmt.Sprintf("Go type %v not handled by this test", t)
}

// checkSchemas compares components/schemas with the Go structs.
func checkSchemas(spec map[string]any) []string {
	var probs []string
	bad := func(format string, args ...any) { probs = append(probs, fmt.Sprintf(format, args...)) }
	schemas := mapAt(spec, "components", "schemas")
	for name, typ := range wireTypes {
		s := mapAt(schemas, name)
		if s == nil {
			bad("schema %s missing from components/schemas", name)
			continue
		}
		if s["type"] != "object" {
			bad("schema %s: type is %v, want object", name, s["type"])
		}
		props := mapAt(s, "properties")
		var wantRequired []string
		seen := map[string]bool{}
		for _, f := range jsonFields(typ, false) {
			seen[f.name] = true
			if !f.omitempty && !f.optional {
				wantRequired = append(wantRequired, f.name)
			}
			p := mapAt(props, f.name)
			if p == nil {
				bad("schema %s: property %q missing", name, f.name)
				continue
			}
			nullable := f.typ.Kind() == reflect.Pointer && !f.omitempty
			if msg := checkType(p, f.typ, nullable); msg != "" {
				bad("schema %s: property %q: %s", name, f.name, msg)
			}
		}
		for p := range props {
			if !seen[p] {
				bad("schema %s: property %q is not a JSON field of api.%s", name, p, name)
			}
		}
		sort.Strings(wantRequired)
		if got := stringSet(s["required"]); !slices.Equal(got, wantRequired) {
			bad("schema %s: required is %v, want %v (the fields without omitempty)", name, got, wantRequired)
		}
	}
	for name := range schemas {
		if wireTypes[name] == nil {
			bad("schema %s has no Go type in api.go", name)
		}
	}
	return probs
}

// apiSource is what the test reads from api.go's syntax: struct names, and
// string constants by name with the comment after each.
type apiSource struct {
	structs  []string
	consts   map[string]string // name → value
	comments map[string]string // name → line comment
}

func parseAPI(t *testing.T) apiSource {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "api.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	src := apiSource{consts: map[string]string{}, comments: map[string]string{}}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok {
			continue
		}
		for _, spec := range g.Specs {
			switch s := spec.(type) {
			case *ast.TypeSpec:
				if _, ok := s.Type.(*ast.StructType); ok && s.Name.IsExported() {
					src.structs = append(src.structs, s.Name.Name)
				}
			case *ast.ValueSpec:
				for i, n := range s.Names {
					if i >= len(s.Values) {
						continue
					}
					lit, ok := s.Values[i].(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						continue
					}
					v, _ := strconv.Unquote(lit.Value)
					src.consts[n.Name] = v
					if s.Comment != nil {
						src.comments[n.Name] = s.Comment.Text()
					}
				}
			}
		}
	}
	return src
}

func (s apiSource) values(prefix string) []string {
	var out []string
	for name, v := range s.consts {
		if strings.HasPrefix(name, prefix) {
			out = append(out, v)
		}
	}
	sort.Strings(out)
	return out
}

// checkEnums compares the enums of the document with api.go's constants, and
// each error response with the status its code travels with.
func checkEnums(spec map[string]any, src apiSource) []string {
	var probs []string
	bad := func(format string, args ...any) { probs = append(probs, fmt.Sprintf(format, args...)) }
	schemas := mapAt(spec, "components", "schemas")
	for _, c := range []struct {
		where  string
		schema map[string]any
		prefix string
		extra  []string
	}{
		{"Sandbox.state", mapAt(schemas, "Sandbox", "properties", "state"), "State", nil},
		{"parameter state", resolve(spec, mapAt(spec, "components", "parameters", "StateFilter", "schema")), "State", []string{"all"}},
		{"Event.type", mapAt(schemas, "Event", "properties", "type"), "Event", nil},
		{"Process.state", mapAt(schemas, "Process", "properties", "state"), "Process", nil},
		{"FileEntry.type", mapAt(schemas, "FileEntry", "properties", "type"), "FileType", nil},
		{"ErrorBody.code", mapAt(schemas, "ErrorBody", "properties", "code"), "Code", nil},
	} {
		want := append(src.values(c.prefix), c.extra...)
		sort.Strings(want)
		if got := stringSet(c.schema["enum"]); !slices.Equal(got, want) {
			bad("%s: enum is %v, want %v", c.where, got, want)
		}
	}

	// code → status, from the comments in api.go ("// 409: wrong state").
	status := map[string]string{}
	for name, v := range src.consts {
		if strings.HasPrefix(name, "Code") {
			m := regexp.MustCompile(`^\s*(\d{3})`).FindStringSubmatch(src.comments[name])
			if m == nil {
				bad("api.go: %s has no status comment", name)
				continue
			}
			status[v] = m[1]
		}
	}
	covered := map[string]bool{}
	for path, item := range mapAt(spec, "paths") {
		im, _ := item.(map[string]any)
		for method, op := range im {
			for st, resp := range mapAt(op, "responses") {
				if code, err := strconv.Atoi(st); err != nil || code < 400 {
					continue
				}
				rm, _ := resp.(map[string]any)
				r := resolve(spec, rm)
				ex := mapAt(r, "content", "application/json", "example", "error")
				code, _ := ex["code"].(string)
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

func TestSpecRoutes(t *testing.T) {
	report(t, checkRoutes(loadSpec(t), parseRoutes(t)))
}

func TestSpecSchemas(t *testing.T) {
	for _, name := range parseAPI(t).structs {
		if wireTypes[name] == nil {
			t.Errorf("api.go declares struct %s: add it to wireTypes in openapi_test.go and to openapi.yaml", name)
		}
	}
	report(t, checkSchemas(loadSpec(t)))
}

func TestSpecEnumsAndErrors(t *testing.T) {
	report(t, checkEnums(loadSpec(t), parseAPI(t)))
}

// TestSpecChecksCatchOmissions removes pieces from a parsed copy of the
// document and expects the checks to notice.
func TestSpecChecksCatchOmissions(t *testing.T) {
	routes := parseRoutes(t)
	src := parseAPI(t)
	for _, c := range []struct {
		name   string
		mutate func(spec map[string]any)
		check  func(spec map[string]any) []string
		want   string
	}{
		{
			"route", func(s map[string]any) { delete(mapAt(s, "paths", "/v1/sandboxes/{id}/files/stat"), "get") },
			func(s map[string]any) []string { return checkRoutes(s, routes) }, "GET /v1/sandboxes/{id}/files/stat",
		},
		{
			"path", func(s map[string]any) { delete(mapAt(s, "paths"), "/v1/health") },
			func(s map[string]any) []string { return checkRoutes(s, routes) }, "GET /v1/health",
		},
		{
			"query parameter", func(s map[string]any) { delete(mapAt(s, "paths", "/v1/sandboxes/{id}/files", "delete"), "parameters") },
			func(s map[string]any) []string { return checkRoutes(s, routes) }, `"recursive"`,
		},
		{
			"field", func(s map[string]any) {
				delete(mapAt(s, "components", "schemas", "ExecResult", "properties"), "stdout_bytes")
			},
			checkSchemas, `"stdout_bytes"`,
		},
		{
			"flattened field", func(s map[string]any) { delete(mapAt(s, "components", "schemas", "Event", "properties"), "exit_code") },
			checkSchemas, `"exit_code"`,
		},
		{
			"nullability", func(s map[string]any) {
				mapAt(s, "components", "schemas", "ExecResult", "properties", "signal")["type"] = "string"
			},
			checkSchemas, `"signal"`,
		},
		{
			"schema", func(s map[string]any) { delete(mapAt(s, "components", "schemas"), "Health") },
			checkSchemas, "Health",
		},
		{
			"enum", func(s map[string]any) {
				p := mapAt(s, "components", "schemas", "Sandbox", "properties", "state")
				p["enum"] = p["enum"].([]any)[1:]
			},
			func(s map[string]any) []string { return checkEnums(s, src) }, "Sandbox.state",
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
