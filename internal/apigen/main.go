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
//	x-file               on a schema: its group (default common). Each group
//	                     is written to its own file in every language:
//	                     api/<group>.gen.go, the Python SDK's
//	                     _types_gen_<group>.py and _models_gen_<group>.py,
//	                     the TypeScript SDK's types.<group>.gen.ts; the
//	                     modules _types_gen.py, _models_gen.py and
//	                     types.gen.ts re-export them all. A group imports
//	                     the schemas and enums it uses from the others, so
//	                     the groups must not import each other in a cycle
//	                     (load fails, naming it)
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

// outputs returns the generated files: per group the Go wire types and
// the SDKs' types and models, the modules that re-export each SDK's
// groups, the Go error table and the SDKs' error classes.
func outputs(c *contract) []output {
	var outs []output
	for _, g := range c.groups() {
		outs = append(outs,
			output{"api/" + g + ".gen.go", genGoTypes(g)},
			output{pyTypesDir + "_types_gen_" + g + ".py", genPyTypes(g)},
			output{pyTypesDir + "_models_gen_" + g + ".py", genPyModels(g)},
			output{tsDir + "types." + g + ".gen.ts", genTSTypes(g)},
		)
	}
	return append(outs,
		output{"api/errors.gen.go", genGoErrors},
		output{tsDir + "types.gen.ts", genTSIndex},
		output{tsDir + "errors.gen.ts", genTSErrors},
		output{pyTypesDir + "_types_gen.py", genPyTypesIndex},
		output{pyTypesDir + "_errors_gen.py", genPyErrors},
		output{pyTypesDir + "_models_gen.py", genPyModelsIndex},
	)
}

const (
	pyTypesDir = "sdk/python/src/paddock/"
	tsDir      = "sdk/typescript/src/"
)

// generatedGlobs are where generated files live; a file there that starts
// with the generated-code header and is no longer an output (its group was
// renamed or emptied) is stale and removed by run.
var generatedGlobs = []string{"api/*.gen.go", pyTypesDir + "_*_gen*.py", tsDir + "*.gen.ts"}

// staleFiles returns the generated files under root that outs no longer
// writes.
func staleFiles(root string, outs []output) ([]string, error) {
	want := map[string]bool{}
	for _, o := range outs {
		want[o.path] = true
	}
	var stale []string
	for _, g := range generatedGlobs {
		paths, err := filepath.Glob(filepath.Join(root, g))
		if err != nil {
			return nil, err
		}
		for _, p := range paths {
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return nil, err
			}
			if want[filepath.ToSlash(rel)] {
				continue
			}
			head := make([]byte, 128)
			f, err := os.Open(p)
			if err != nil {
				return nil, err
			}
			n, _ := f.Read(head)
			f.Close()
			if bytes.Contains(head[:n], []byte(scriptHeader)) {
				stale = append(stale, p)
			}
		}
	}
	return stale, nil
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
	outs := outputs(c)
	for _, o := range outs {
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
	stale, err := staleFiles(root, outs)
	if err != nil {
		return err
	}
	for _, p := range stale {
		if err := os.Remove(p); err != nil {
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
