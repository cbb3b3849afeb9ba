package main

import (
	"bytes"
	"fmt"
	"strings"
)

// genPyTypes writes the wire types of group g as TypedDicts named after
// their schema with a JSON suffix (the JSON as it travels: times are RFC
// 3339 strings, bytes base64), and the named enums it declares as Literal
// types; _types_gen.py re-exports every group.
func genPyTypes(g string) func(*contract) ([]byte, error) {
	return func(c *contract) ([]byte, error) {
		var names []string
		home := c.enumHomes()
		aliases := map[string]bool{}
		var body bytes.Buffer
		for _, s := range c.inGroup(g) {
			for _, p := range s.props {
				if p.enumName != "" && home[p.enumName] == g && !aliases[p.enumName] {
					aliases[p.enumName] = true
					names = append(names, p.enumName)
					fmt.Fprintf(&body, "#: The values of ``%s.%s``.\n%s = Literal[%s]\n\n\n", s.name, p.name, p.enumName, pyLiterals(p.enum))
				}
			}
			if err := pyTypedDict(&body, c, s); err != nil {
				return nil, err
			}
			names = append(names, s.name+"JSON")
		}
		var b bytes.Buffer
		fmt.Fprintf(&b, "# %s\n\"\"\"The wire types of the Paddock REST API (/v1) of the %s group, as\nTypedDicts of the JSON as it travels (times are RFC 3339 strings, bytes\nbase64 strings), and its enums as Literal types. ``_types_gen`` re-exports\nthem.\"\"\"\n\n", scriptHeader, g)
		b.WriteString("from __future__ import annotations\n\n")
		pyTypingImport(&b, body.String(), "Dict", "List", "Literal", "Optional", "TypedDict")
		from, ims := c.importsFrom(g, true)
		if len(from) > 0 {
			b.WriteString("\n")
		}
		for _, o := range from {
			var ns []string
			for _, im := range ims[o] {
				n := im.name
				if !im.enum {
					n += "JSON"
				}
				ns = append(ns, n)
			}
			// Only in the quoted annotations of the TypedDicts: for type checkers.
			fmt.Fprintf(&b, "from ._types_gen_%s import %s  # noqa: F401\n", o, strings.Join(ns, ", "))
		}
		b.WriteString("\n")
		pyAll(&b, names)
		b.WriteString("\n\n")
		b.Write(bytes.TrimRight(body.Bytes(), "\n"))
		b.WriteString("\n")
		return b.Bytes(), nil
	}
}

// pyTypingImport writes the import of the names of typing that body uses.
func pyTypingImport(b *bytes.Buffer, body string, names ...string) {
	var used []string
	for _, n := range names {
		if strings.Contains(body, n+"[") || strings.Contains(body, n+"(") {
			used = append(used, n)
		}
	}
	if len(used) > 0 {
		fmt.Fprintf(b, "from typing import %s\n", strings.Join(used, ", "))
	}
}

// pyAll writes __all__.
func pyAll(b *bytes.Buffer, names []string) {
	b.WriteString("__all__ = [\n")
	for _, n := range names {
		fmt.Fprintf(b, "    %q,\n", n)
	}
	b.WriteString("]\n")
}

// pyTypedDict writes a schema as a TypedDict: the required keys in one
// base, the optional ones in another (total=False), both in the functional
// form since a key may be a Python keyword ("from").
func pyTypedDict(b *bytes.Buffer, c *contract, s *schema) error {
	name := s.name + "JSON"
	var bases []string
	for _, part := range []struct {
		suffix   string
		required bool
	}{{"Required", true}, {"Optional", false}} {
		var props []*prop
		for _, p := range s.props {
			if p.required == part.required {
				props = append(props, p)
			}
		}
		if len(props) == 0 {
			continue
		}
		base := "_" + name + part.suffix
		bases = append(bases, base)
		fmt.Fprintf(b, "%s = TypedDict(\n    %q,\n    {\n", base, base)
		for _, p := range props {
			fmt.Fprintf(b, "        %q: %q,\n", p.name, pyType(c, p))
		}
		b.WriteString("    },\n")
		if !part.required {
			b.WriteString("    total=False,\n")
		}
		b.WriteString(")\n\n\n")
	}
	if len(bases) == 0 {
		return fmt.Errorf("%s has no properties", s.name)
	}
	fmt.Fprintf(b, "class %s(%s):\n", name, strings.Join(bases, ", "))
	if s.doc == "" {
		return fmt.Errorf("%s has no description", s.name)
	}
	pyDocstring(b, "    ", s.doc)
	b.WriteString("\n")
	return nil
}

func pyType(c *contract, p *prop) string {
	t := pyTypeOf(c, p.t)
	switch {
	case p.openEnum:
	case p.enumName != "":
		t = p.enumName
	case len(p.enum) > 0:
		t = "Literal[" + pyLiterals(p.enum) + "]"
	}
	if p.t.nullable {
		t = "Optional[" + t + "]"
	}
	return t
}

func pyTypeOf(c *contract, t *typ) string {
	switch t.kind {
	case "string", "time", "bytes":
		return "str"
	case "integer":
		return "int"
	case "number":
		return "float"
	case "boolean":
		return "bool"
	case "ref":
		return t.ref + "JSON"
	case "array":
		return "List[" + pyTypeOf(c, t.elem) + "]"
	case "map":
		return "Dict[str, " + pyTypeOf(c, t.elem) + "]"
	}
	return "object"
}

func pyLiterals(values []string) string {
	var q []string
	for _, v := range values {
		q = append(q, fmt.Sprintf("%q", v))
	}
	return strings.Join(q, ", ")
}

func pyDocstring(b *bytes.Buffer, indent, text string) {
	ps := paragraphs(strings.ReplaceAll(text, `"""`, `'''`))
	if len(ps) == 0 {
		return
	}
	if len(ps) == 1 && len(ps[0]) < 80-len(indent) {
		fmt.Fprintf(b, "%s\"\"\"%s\"\"\"\n\n", indent, ps[0])
		return
	}
	b.WriteString(indent + "\"\"\"")
	for i, p := range ps {
		if i > 0 {
			b.WriteString("\n")
		}
		for j, l := range wrap(p, 76-len(indent)) {
			if i > 0 || j > 0 {
				b.WriteString(indent)
			}
			b.WriteString(l + "\n")
		}
	}
	b.WriteString(indent + "\"\"\"\n\n")
}

// genPyErrors writes one exception class per row of the error table and the
// tables errors.py maps codes and statuses with.
func genPyErrors(c *contract) ([]byte, error) {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# %s\n\"\"\"One exception class per API error code (``x-error-codes`` of\n``ErrorBody.code`` in api/openapi.yaml); ``paddock.errors`` re-exports them.\"\"\"\n\n", scriptHeader)
	b.WriteString("from __future__ import annotations\n\nfrom typing import Dict, Type\n\nfrom ._error_base import PaddockError\n\n__all__ = [\n")
	for _, e := range c.errors {
		fmt.Fprintf(&b, "    %q,\n", e.pyClass)
	}
	b.WriteString("]\n\n")
	for _, e := range c.errors {
		fmt.Fprintf(&b, "\nclass %s(PaddockError):\n", e.pyClass)
		pyDocstring(&b, "    ", fmt.Sprintf("%d ``%s``: %s", e.status, e.code, e.doc))
		fmt.Fprintf(&b, "    __module__ = \"paddock.errors\"\n    default_code, default_status = %q, %d\n\n", e.code, e.status)
	}
	b.WriteString("\n#: The exception class of each error code.\nBY_CODE: Dict[str, Type[PaddockError]] = {\n")
	for _, e := range c.errors {
		fmt.Fprintf(&b, "    %q: %s,\n", e.code, e.pyClass)
	}
	b.WriteString("}\n\n#: The class of a status, for answers whose body carries no code (alternative\n#: statuses included).\nBY_STATUS: Dict[int, Type[PaddockError]] = {\n")
	for _, e := range c.errors {
		for _, st := range append([]int{e.status}, e.also...) {
			fmt.Fprintf(&b, "    %d: %s,\n", st, e.pyClass)
		}
	}
	b.WriteString("}\n\n#: The reason phrase of each of those statuses, lower case.\nSTATUS_TEXT: Dict[int, str] = {\n")
	statuses, text := statusTexts(c)
	for _, st := range statuses {
		fmt.Fprintf(&b, "    %d: %q,\n", st, text[st])
	}
	b.WriteString("}\n")
	return b.Bytes(), nil
}

// pyKeywords are the property names that cannot be Python identifiers.
var pyKeywords = map[string]bool{"from": true, "class": true, "import": true, "global": true, "lambda": true, "pass": true}

// pyField is the dataclass field name of a property ("from" → "from_").
func pyField(name string) string {
	if pyKeywords[name] {
		return name + "_"
	}
	return name
}

// genPyModels writes one dataclass per schema of group g, named after the
// schema, with a from_json that reads the JSON leniently (a missing or
// mistyped field takes its zero value, times become aware datetimes) and the
// to_json of paddock._convert.Model; the classes of other groups it reads
// are imported from their module. _models_gen.py re-exports every group;
// paddock.types replaces a few with hand-written classes (SandboxInfo,
// ExecResult, Event, ...).
func genPyModels(g string) func(*contract) ([]byte, error) {
	return func(c *contract) ([]byte, error) {
		var body bytes.Buffer
		var names []string
		for _, s := range c.inGroup(g) {
			names = append(names, s.name)
			fmt.Fprintf(&body, "\n\n@dataclass\nclass %s(Model):\n", s.name)
			pyDocstring(&body, "    ", s.doc)
			for _, p := range s.props {
				fmt.Fprintf(&body, "    %s: %s = %s\n", pyField(p.name), pyModelType(p.t), pyModelDefault(p.t))
			}
			fmt.Fprintf(&body, "\n    @classmethod\n    def from_json(cls, d: Any) -> %q:\n        d = obj(d)\n        return cls(\n", s.name)
			for _, p := range s.props {
				fmt.Fprintf(&body, "            %s=%s,\n", pyField(p.name), pyConvert(p.t, fmt.Sprintf("d.get(%q)", p.name)))
			}
			body.WriteString("        )\n")
		}
		var b bytes.Buffer
		fmt.Fprintf(&b, "# %s\n\"\"\"The wire types of the Paddock REST API (/v1) of the %s group, as\ndataclasses with ``from_json`` and ``to_json``; ``_models_gen`` re-exports\nthem.\"\"\"\n\n", scriptHeader, g)
		b.WriteString("from __future__ import annotations\n\n")
		text := body.String()
		var dc []string
		if strings.Contains(text, "@dataclass") {
			dc = append(dc, "dataclass")
		}
		if strings.Contains(text, "field(") {
			dc = append(dc, "field")
		}
		fmt.Fprintf(&b, "from dataclasses import %s\n", strings.Join(dc, ", "))
		if strings.Contains(text, "datetime") {
			b.WriteString("from datetime import datetime\n")
		}
		b.WriteString("from typing import Any")
		for _, n := range []string{"Dict", "List", "Optional"} {
			if strings.Contains(text, n+"[") {
				b.WriteString(", " + n)
			}
		}
		b.WriteString("\n\nfrom ._convert import Model")
		for _, h := range []string{"b_", "f_", "i_", "list_of", "map_of", "obj", "s_", "t_"} {
			if strings.Contains(text, h+"(") {
				b.WriteString(", " + h)
			}
		}
		b.WriteString("\n")
		from, ims := c.importsFrom(g, false)
		for _, o := range from {
			var ns []string
			for _, im := range ims[o] {
				ns = append(ns, im.name)
			}
			fmt.Fprintf(&b, "from ._models_gen_%s import %s\n", o, strings.Join(ns, ", "))
		}
		b.WriteString("\n")
		pyAll(&b, names)
		b.WriteString(text)
		return b.Bytes(), nil
	}
}

func pyModelType(t *typ) string {
	switch t.kind {
	case "string", "bytes":
		return "str"
	case "time":
		return "Optional[datetime]"
	case "integer":
		return "int"
	case "number":
		return "float"
	case "boolean":
		return "bool"
	case "ref":
		return "Optional[" + t.ref + "]"
	case "array":
		return "List[" + strings.TrimSuffix(strings.TrimPrefix(pyModelType(t.elem), "Optional["), "]") + "]"
	case "map":
		return "Dict[str, " + strings.TrimSuffix(strings.TrimPrefix(pyModelType(t.elem), "Optional["), "]") + "]"
	}
	return "Any"
}

func pyModelDefault(t *typ) string {
	switch t.kind {
	case "string", "bytes":
		return `""`
	case "integer":
		return "0"
	case "number":
		return "0.0"
	case "boolean":
		return "False"
	case "array":
		return "field(default_factory=list)"
	case "map":
		return "field(default_factory=dict)"
	}
	return "None"
}

// pyConvert is the expression reading the JSON value v as type t.
func pyConvert(t *typ, v string) string {
	switch t.kind {
	case "string", "bytes":
		return "s_(" + v + ")"
	case "time":
		return "t_(" + v + ")"
	case "integer":
		return "i_(" + v + ")"
	case "number":
		return "f_(" + v + ")"
	case "boolean":
		return "b_(" + v + ")"
	case "ref":
		return fmt.Sprintf("%s.from_json(%s) if isinstance(%s, dict) else None", t.ref, v, v)
	case "array":
		return fmt.Sprintf("list_of(%s, lambda x: %s)", v, pyConvert(t.elem, "x"))
	case "map":
		return fmt.Sprintf("map_of(%s, lambda x: %s)", v, pyConvert(t.elem, "x"))
	}
	return v
}
