// Command apigen writes the code that derives from api/openapi.yaml, the one
// source of the Paddock API contract: the Go wire types and the error table
// of package api, and the types and error classes of the Python and
// TypeScript SDKs. Run it from the repository root with `make generate`
// (`go run ./internal/apigen`); `make check-generated` fails when a
// committed file differs from what it writes.
//
// The generator reads the schemas of components/schemas in document order
// and a few vendor extensions where a mechanical rule cannot decide:
//
//	x-go-file            on a schema: the file api/<name>.gen.go it is written
//	                     to (default types)
//	x-go-name            Go name of a schema or property (default: CamelCase
//	                     of the JSON name with the initialisms of goInitialisms)
//	x-go-type            Go type of a property (default: derived from its schema)
//	x-go-embed           on a schema: {schema, pointer, from, to}, the
//	                     properties from..to are those of an embedded struct
//	x-go-const-prefix    on an enum property: declare one Go constant per value
//	x-go-const-doc       the doc comment of that constant group
//	x-enum-descriptions  value → line comment of its constant
//	x-ts-name            name of the type in the TypeScript SDK
//	x-open-enum          the SDKs type the enum as a string (it may grow)
//	x-ts-options-name    with a oneOf of single required properties: the
//	                     name of the interface of the other properties
//	x-enum-name          name of the enum's type alias in the SDKs
//	x-error-codes        on ErrorBody.code: the error table (code, status,
//	                     also, description, py-class)
package main

import (
	"bytes"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"gopkg.in/yaml.v3"
)

func main() {
	spec := flag.String("spec", "api/openapi.yaml", "the OpenAPI document")
	root := flag.String("root", ".", "the repository root the outputs are written under")
	flag.Parse()
	if err := run(*spec, *root); err != nil {
		log.Fatalf("apigen: %v", err)
	}
}

// output is one generated file.
type output struct {
	path string
	gen  func(*contract) ([]byte, error)
}

// outputs returns the generated files: the Go wire types (one file per
// x-go-file), the Go error table and the SDKs' types and error classes.
func outputs(c *contract) []output {
	var outs []output
	for _, f := range goTypeFiles(c) {
		outs = append(outs, output{"api/" + f + ".gen.go", genGoTypes(f)})
	}
	return append(outs, fixedOutputs...)
}

var fixedOutputs = []output{
	{"api/errors.gen.go", genGoErrors},
	{"sdk/typescript/src/types.gen.ts", genTSTypes},
	{"sdk/typescript/src/errors.gen.ts", genTSErrors},
	{"sdk/python/src/paddock/_types_gen.py", genPyTypes},
	{"sdk/python/src/paddock/_errors_gen.py", genPyErrors},
	{"sdk/python/src/paddock/_models_gen.py", genPyModels},
}

func run(specPath, root string) error {
	src, err := os.ReadFile(specPath)
	if err != nil {
		return err
	}
	c, err := load(src)
	if err != nil {
		return fmt.Errorf("%s: %w", specPath, err)
	}
	for _, o := range outputs(c) {
		b, err := o.gen(c)
		if err != nil {
			return fmt.Errorf("%s: %w", o.path, err)
		}
		p := filepath.Join(root, o.path)
		if old, err := os.ReadFile(p); err == nil && bytes.Equal(old, b) {
			continue
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// get returns the value of key in the mapping n, or nil.
func get(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

// str returns the scalar value of key in n, or "".
func str(n *yaml.Node, key string) string {
	v := get(n, key)
	if v == nil || v.Kind != yaml.ScalarNode {
		return ""
	}
	return v.Value
}

// pairs returns the keys and values of the mapping n, in document order.
func pairs(n *yaml.Node) (keys []string, vals []*yaml.Node) {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil, nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		keys = append(keys, n.Content[i].Value)
		vals = append(vals, n.Content[i+1])
	}
	return keys, vals
}

// strs returns a scalar or a sequence of scalars as strings.
func strs(n *yaml.Node) []string {
	if n == nil {
		return nil
	}
	if n.Kind == yaml.ScalarNode {
		return []string{n.Value}
	}
	var out []string
	for _, e := range n.Content {
		out = append(out, e.Value)
	}
	return out
}
