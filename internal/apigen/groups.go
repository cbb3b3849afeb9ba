package main

import (
	"fmt"
	"slices"
	"strings"
)

// defaultGroup is the group of a schema without x-file (errors, health);
// its Go file also holds Version.
const defaultGroup = "common"

// groups returns the x-file groups in the order of first use in the
// document, the default group first. Every language writes one file per
// group, so no generated file grows past the size of a hand-written one.
func (c *contract) groups() []string {
	gs := []string{defaultGroup}
	for _, s := range c.schemas {
		if !slices.Contains(gs, s.group) {
			gs = append(gs, s.group)
		}
	}
	return gs
}

// inGroup returns the schemas of group g, in document order.
func (c *contract) inGroup(g string) []*schema {
	var out []*schema
	for _, s := range c.schemas {
		if s.group == g {
			out = append(out, s)
		}
	}
	return out
}

// enumHomes maps each named enum (x-enum-name) to the group that declares
// its SDK type alias: the group of the first schema that uses it.
func (c *contract) enumHomes() map[string]string {
	home := map[string]string{}
	for _, s := range c.schemas {
		for _, p := range s.props {
			if p.enumName != "" && home[p.enumName] == "" {
				home[p.enumName] = s.group
			}
		}
	}
	return home
}

// import_ is one name a group's file takes from another group's file.
type import_ struct {
	group string
	name  string // the schema's name, or the enum's alias name
	enum  bool
	via   string // Schema.property that needs it, for error messages
}

// imports returns what the schemas of group g use from other groups:
// referenced schemas and, with enums, the named enums declared elsewhere.
// Each language imports them from the defining group's file (the Python
// dataclasses call their from_json), so the groups must not form a cycle
// (checkGroups).
func (c *contract) imports(g string, enums bool) []import_ {
	home := c.enumHomes()
	var out []import_
	seen := map[string]bool{}
	add := func(im import_) {
		if im.group != g && !seen[im.name] {
			seen[im.name] = true
			out = append(out, im)
		}
	}
	for _, s := range c.inGroup(g) {
		for _, p := range s.props {
			via := s.name + "." + p.name
			for t := p.t; t != nil; t = t.elem {
				if t.kind == "ref" {
					add(import_{group: c.byName[t.ref].group, name: t.ref, via: via})
				}
			}
			if enums && p.enumName != "" && !p.openEnum {
				add(import_{group: home[p.enumName], name: p.enumName, enum: true, via: via})
			}
		}
	}
	return out
}

// importsFrom groups the imports of g by the group they come from, in the
// order of c.groups.
func (c *contract) importsFrom(g string, enums bool) (from []string, names map[string][]import_) {
	names = map[string][]import_{}
	for _, im := range c.imports(g, enums) {
		names[im.group] = append(names[im.group], im)
	}
	for _, o := range c.groups() {
		if len(names[o]) > 0 {
			from = append(from, o)
		}
	}
	return from, names
}

// checkGroups fails when the groups import each other in a cycle: a Python
// module cannot import a class from a module that is still importing it.
// The error names the cycle and the property behind each edge.
func (c *contract) checkGroups() error {
	edges := map[string][]import_{}
	for _, g := range c.groups() {
		for _, im := range c.imports(g, true) {
			if !slices.ContainsFunc(edges[g], func(e import_) bool { return e.group == im.group }) {
				edges[g] = append(edges[g], im)
			}
		}
	}
	const (
		unvisited = iota
		active
		done
	)
	state := map[string]int{}
	var stack []string // the groups being visited, outermost first
	var via []import_  // via[i]: the edge from stack[i] to stack[i+1]
	var visit func(g string) error
	visit = func(g string) error {
		state[g] = active
		stack = append(stack, g)
		for _, e := range edges[g] {
			switch state[e.group] {
			case active:
				hops := []string{}
				cycle := append(via[slices.Index(stack, e.group):len(via):len(via)], e)
				for _, h := range cycle {
					hops = append(hops, fmt.Sprintf("-> %s (%s)", h.group, h.via))
				}
				return fmt.Errorf("x-file groups import each other in a cycle: %s %s; move a schema to another group",
					e.group, strings.Join(hops, " "))
			case unvisited:
				via = append(via, e)
				if err := visit(e.group); err != nil {
					return err
				}
				via = via[:len(via)-1]
			}
		}
		stack = stack[:len(stack)-1]
		state[g] = done
		return nil
	}
	for _, g := range c.groups() {
		if state[g] == unvisited {
			if err := visit(g); err != nil {
				return err
			}
		}
	}
	return nil
}
