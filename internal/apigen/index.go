package main

import (
	"bytes"
	"fmt"
)

// The index modules keep the SDKs' public import points of the generated
// types (_types_gen, _models_gen, types.gen) while the types themselves are
// written one file per x-file group.

// genTSIndex writes types.gen.ts: a type-only re-export of every group.
func genTSIndex(c *contract) ([]byte, error) {
	var b bytes.Buffer
	fmt.Fprintf(&b, "// %s\n//\n// The wire types of the Paddock REST API (/v1), one module per x-file group\n// of api/openapi.yaml, re-exported here; types.ts re-exports them.\n\n", scriptHeader)
	for _, g := range c.groups() {
		fmt.Fprintf(&b, "export type * from \"./types.%s.gen.js\";\n", g)
	}
	return b.Bytes(), nil
}

// genPyTypesIndex writes _types_gen.py: every group's TypedDicts and enums.
func genPyTypesIndex(c *contract) ([]byte, error) {
	return pyIndex(c, "_types_gen", "The wire types of the Paddock REST API (/v1) as TypedDicts and its enums as\nLiteral types, one module per x-file group of api/openapi.yaml, re-exported\nhere; ``paddock.types`` re-exports them next to the dataclasses the SDK\nreturns."), nil
}

// genPyModelsIndex writes _models_gen.py: every group's dataclasses.
func genPyModelsIndex(c *contract) ([]byte, error) {
	return pyIndex(c, "_models_gen", "The wire types of the Paddock REST API (/v1) as dataclasses with\n``from_json`` and ``to_json``, one module per x-file group of\napi/openapi.yaml, re-exported here; ``paddock.types`` re-exports them."), nil
}

// pyIndex writes a module that re-exports every group module of module;
// its __all__ is the groups' own, so the names are listed once, where they
// are defined.
func pyIndex(c *contract, module, doc string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# %s\n\"\"\"%s\"\"\"\n\n", scriptHeader, doc)
	b.WriteString("from . import (\n")
	for _, g := range c.groups() {
		fmt.Fprintf(&b, "    %s_%s,\n", module, g)
	}
	b.WriteString(")\n")
	for _, g := range c.groups() {
		fmt.Fprintf(&b, "from .%s_%s import *  # noqa: F401,F403\n", module, g)
	}
	b.WriteString("\n__all__: list = []\n")
	for _, g := range c.groups() {
		fmt.Fprintf(&b, "__all__ += %s_%s.__all__\n", module, g)
	}
	return b.Bytes()
}
