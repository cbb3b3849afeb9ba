package fakemodel

import (
	"regexp"
	"strings"
)

// mcpToolName matches the name an MCP client such as Claude Code gives a
// tool of an MCP server: "mcp__<server>__<tool>".
var mcpToolName = regexp.MustCompile(`^mcp__[A-Za-z0-9_-]+?__([A-Za-z0-9_-]+)$`)

// unprefixMCP lets a script written for plain tool names ("run_python")
// play a conversation whose tools come from an MCP server: it returns st
// with the offered tools and the results' names unprefixed, and a function
// that gives the turn's calls back their prefixed names.
func unprefixMCP(st State) (State, func(Turn) Turn) {
	full := map[string]string{}
	plain := func(name string) string {
		if m := mcpToolName.FindStringSubmatch(name); m != nil {
			if _, taken := full[m[1]]; !taken {
				full[m[1]] = name
			}
			return m[1]
		}
		return name
	}
	tools := make([]string, len(st.Tools))
	for i, t := range st.Tools {
		tools[i] = plain(t)
	}
	st.Tools = tools
	results := make([]Result, len(st.Results))
	for i, r := range st.Results {
		r.Name = plain(r.Name)
		results[i] = r
	}
	st.Results = results
	return st, func(t Turn) Turn {
		calls := make([]Call, len(t.Calls))
		for i, c := range t.Calls {
			if f, ok := full[c.Name]; ok && !strings.HasPrefix(c.Name, "mcp__") {
				c.Name = f
			}
			calls[i] = c
		}
		t.Calls = calls
		return t
	}
}
