package main

import (
	"fmt"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// contract is what the generators need from the OpenAPI document.
type contract struct {
	version string
	schemas []*schema
	byName  map[string]*schema
	errors  []errorCode
}

// schema is one object of components/schemas.
type schema struct {
	name, goName, tsName string
	doc                  string
	group                string // x-file: the generated files of each language it is written to
	props                []*prop
	embed                *embed
	// variants are the property names of a oneOf of `required: [name]`
	// branches (ExecRequest: argv or command), with their TypeScript names.
	variants     []string
	variantNames map[string]string
	optionsName  string // TypeScript name of the other properties
}

// embed says that the properties from..to of a schema are the fields of
// another schema, embedded in the Go struct (Event embeds *ExecResult).
type embed struct {
	schema   string
	pointer  bool
	from, to string
}

// prop is one property of a schema.
type prop struct {
	name, goName, doc string
	goType            string // x-go-type: overrides the derived Go type
	openEnum          bool   // x-open-enum: the SDKs type it as a string (the enum may grow)
	required          bool
	t                 *typ
	enum              []string
	enumName          string // SDK type alias of the enum
	constPrefix       string // Go constants of the enum
	constDoc          string
	enumDesc          map[string]string
}

// typ is the type of a property.
type typ struct {
	kind     string // string integer number boolean time bytes array map ref object
	format   string
	nullable bool
	elem     *typ
	ref      string
}

// errorCode is one row of the error table.
type errorCode struct {
	code, name, pyClass, doc string
	status                   int
	also                     []int
}

func load(src []byte) (*contract, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(src, &doc); err != nil {
		return nil, err
	}
	if len(doc.Content) != 1 {
		return nil, fmt.Errorf("empty document")
	}
	root := doc.Content[0]
	c := &contract{version: str(get(root, "info"), "version"), byName: map[string]*schema{}}
	names, nodes := pairs(get(get(root, "components"), "schemas"))
	for i, name := range names {
		s, err := loadSchema(name, nodes[i])
		if err != nil {
			return nil, fmt.Errorf("schema %s: %w", name, err)
		}
		c.schemas = append(c.schemas, s)
		c.byName[name] = s
	}
	var codeProp *yaml.Node
	for i, name := range names {
		if name == "ErrorBody" {
			codeProp = get(get(get(nodes[i], "properties"), "code"), "x-error-codes")
		}
	}
	if codeProp == nil {
		return nil, fmt.Errorf("ErrorBody.code has no x-error-codes")
	}
	for _, e := range codeProp.Content {
		ec := errorCode{code: str(e, "code"), pyClass: str(e, "py-class"), doc: strings.TrimSpace(str(e, "description"))}
		ec.name = camel(ec.code, nil)
		if ec.pyClass == "" {
			ec.pyClass = ec.name
		}
		var err error
		if ec.status, err = strconv.Atoi(str(e, "status")); err != nil {
			return nil, fmt.Errorf("x-error-codes %s: status: %w", ec.code, err)
		}
		for _, a := range strs(get(e, "also")) {
			n, err := strconv.Atoi(a)
			if err != nil {
				return nil, fmt.Errorf("x-error-codes %s: also: %w", ec.code, err)
			}
			ec.also = append(ec.also, n)
		}
		c.errors = append(c.errors, ec)
	}
	return c, c.check()
}

func loadSchema(name string, n *yaml.Node) (*schema, error) {
	if str(n, "type") != "object" {
		return nil, fmt.Errorf("type is %q, want object", str(n, "type"))
	}
	s := &schema{
		name:   name,
		goName: or(str(n, "x-go-name"), name),
		tsName: or(str(n, "x-ts-name"), name),
		doc:    strings.TrimSpace(str(n, "description")),
		group:  or(str(n, "x-file"), defaultGroup),
	}
	if get(n, "x-go-file") != nil {
		return nil, fmt.Errorf("x-go-file is now x-file (it groups the files of every language)")
	}
	if e := get(n, "x-go-embed"); e != nil {
		s.embed = &embed{schema: str(e, "schema"), pointer: str(e, "pointer") == "true", from: str(e, "from"), to: str(e, "to")}
	}
	if o := get(n, "oneOf"); o != nil {
		s.variantNames = map[string]string{}
		for _, br := range o.Content {
			req := strs(get(br, "required"))
			if len(req) != 1 {
				return nil, fmt.Errorf("oneOf branches must each require one property")
			}
			s.variants = append(s.variants, req[0])
			s.variantNames[req[0]] = str(br, "x-ts-name")
		}
		s.optionsName = str(n, "x-ts-options-name")
	}
	required := map[string]bool{}
	for _, r := range strs(get(n, "required")) {
		required[r] = true
	}
	keys, vals := pairs(get(n, "properties"))
	for i, k := range keys {
		p, err := loadProp(k, vals[i], required[k])
		if err != nil {
			return nil, fmt.Errorf("property %s: %w", k, err)
		}
		s.props = append(s.props, p)
	}
	return s, nil
}

func loadProp(name string, n *yaml.Node, required bool) (*prop, error) {
	t, err := loadType(n)
	if err != nil {
		return nil, err
	}
	p := &prop{
		name:        name,
		goName:      or(str(n, "x-go-name"), camel(name, goInitialisms)),
		goType:      str(n, "x-go-type"),
		openEnum:    str(n, "x-open-enum") == "true",
		doc:         strings.TrimSpace(str(n, "description")),
		required:    required,
		t:           t,
		enum:        strs(get(n, "enum")),
		enumName:    str(n, "x-enum-name"),
		constPrefix: str(n, "x-go-const-prefix"),
		constDoc:    str(n, "x-go-const-doc"),
	}
	if d := get(n, "x-enum-descriptions"); d != nil {
		p.enumDesc = map[string]string{}
		ks, vs := pairs(d)
		for i, k := range ks {
			p.enumDesc[k] = vs[i].Value
		}
	}
	return p, nil
}

func loadType(n *yaml.Node) (*typ, error) {
	if ref := str(n, "$ref"); ref != "" {
		return &typ{kind: "ref", ref: strings.TrimPrefix(ref, "#/components/schemas/")}, nil
	}
	t := &typ{format: str(n, "format")}
	for _, k := range strs(get(n, "type")) {
		if k == "null" {
			t.nullable = true
		} else {
			t.kind = k
		}
	}
	switch {
	case t.kind == "string" && t.format == "date-time":
		t.kind = "time"
	case t.kind == "string" && str(n, "contentEncoding") == "base64":
		t.kind = "bytes"
	case t.kind == "array":
		e, err := loadType(get(n, "items"))
		if err != nil {
			return nil, err
		}
		t.elem = e
	case t.kind == "object":
		ap := get(n, "additionalProperties")
		if ap == nil {
			return nil, fmt.Errorf("inline objects need additionalProperties")
		}
		e, err := loadType(ap)
		if err != nil {
			return nil, err
		}
		t.kind, t.elem = "map", e
	case t.kind == "string", t.kind == "integer", t.kind == "number", t.kind == "boolean":
	default:
		return nil, fmt.Errorf("type %q not handled", t.kind)
	}
	return t, nil
}

// check reports references to unknown schemas and inconsistent extensions.
func (c *contract) check() error {
	for _, s := range c.schemas {
		for _, p := range s.props {
			for t := p.t; t != nil; t = t.elem {
				if t.kind == "ref" && c.byName[t.ref] == nil {
					return fmt.Errorf("%s.%s: unknown schema %q", s.name, p.name, t.ref)
				}
			}
		}
		if e := s.embed; e != nil && (c.byName[e.schema] == nil || s.propIndex(e.from) < 0 || s.propIndex(e.to) < s.propIndex(e.from)) {
			return fmt.Errorf("%s: bad x-go-embed", s.name)
		}
	}
	if len(c.errors) == 0 {
		return fmt.Errorf("empty error table")
	}
	return c.checkGroups()
}

func (s *schema) propIndex(name string) int {
	for i, p := range s.props {
		if p.name == name {
			return i
		}
	}
	return -1
}

func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// goInitialisms are the words of JSON names written in capitals in Go.
var goInitialisms = map[string]string{
	"id": "ID", "pid": "PID", "pids": "PIDs", "vcpus": "VCPUs", "mib": "MiB", "gib": "GiB",
	"ms": "MS", "url": "URL", "oci": "OCI", "cpu": "CPU", "oom": "OOM",
}

// camel turns snake_case into CamelCase, writing the words of initialisms
// as given there.
func camel(s string, initialisms map[string]string) string {
	var b strings.Builder
	for _, w := range strings.Split(s, "_") {
		if w == "" {
			continue
		}
		if v, ok := initialisms[w]; ok {
			b.WriteString(v)
			continue
		}
		b.WriteString(strings.ToUpper(w[:1]) + w[1:])
	}
	return b.String()
}
