package main

import (
	"bytes"
	"fmt"
	"strings"
)

// genPyTypes writes the wire types as TypedDicts named after their schema
// with a JSON suffix (the JSON as it travels: times are RFC 3339 strings,
// bytes base64), and the named enums as Literal types.
func genPyTypes(c *contract) ([]byte, error) {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# %s\n\"\"\"The wire types of the Paddock REST API (/v1), as TypedDicts of the JSON\nas it travels (times are RFC 3339 strings, bytes base64 strings), and its\nenums as Literal types. ``paddock.types`` re-exports them next to the\ndataclasses the SDK returns.\"\"\"\n\n", scriptHeader)
	b.WriteString("from __future__ import annotations\n\nfrom typing import Dict, List, Literal, Optional, TypedDict\n\n")
	var names []string
	aliases := map[string]bool{}
	var body bytes.Buffer
	for _, s := range c.schemas {
		for _, p := range s.props {
			if p.enumName != "" && !aliases[p.enumName] {
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
	b.WriteString("__all__ = [\n")
	for _, n := range names {
		fmt.Fprintf(&b, "    %q,\n", n)
	}
	b.WriteString("]\n\n\n")
	b.Write(bytes.TrimRight(body.Bytes(), "\n"))
	b.WriteString("\n")
	return b.Bytes(), nil
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
