package catalog

import (
	"fmt"
	"sort"
)

// Template aliases let a daemon answer to the template names programs
// written for hosted sandboxes use ("python-3.12", "code-interpreter-v1")
// with a template its operator picks: Config.Aliases maps an alias to a
// shared template (base, a config template). An alias is resolved once,
// before any other lookup, by every call that takes a template name from a
// client (Resolve, Get, a recipe's from); it cannot name another alias, a
// base template or a shared template, and no key can create a template of
// its name.

// checkAliases validates cfg.Aliases: well-formed names, no alias shadowing
// a base or shared template, every target a base or shared template.
func checkAliases(cfg Config) error {
	shared := map[string]bool{}
	for name := range cfg.BaseRuntimes {
		shared[canonical(name)] = true
	}
	for name := range cfg.Shared {
		shared[canonical(name)] = true
	}
	names := make([]string, 0, len(cfg.Aliases))
	for a := range cfg.Aliases {
		names = append(names, a)
	}
	sort.Strings(names)
	seen := map[string]string{}
	for _, a := range names {
		target := cfg.Aliases[a]
		if _, _, err := parseTemplateName(a); err != nil {
			return fmt.Errorf("template alias: %w", err)
		}
		c := canonical(a)
		if prev, dup := seen[c]; dup {
			return fmt.Errorf("template alias %q: same name as alias %q", a, prev)
		}
		seen[c] = a
		if shared[c] {
			return fmt.Errorf("template alias %q: a base or config template has that name", a)
		}
		if !shared[canonical(target)] {
			return fmt.Errorf("template alias %q: target %q is not a base or config template (aliases name a template of the daemon config)", a, target)
		}
	}
	return nil
}

// unalias returns the template the alias s stands for, or s itself when it
// is not an alias.
func (t *Catalog) unalias(s string) string {
	if target, ok := t.alias(s); ok {
		return target
	}
	return s
}

// isAlias reports whether s names an alias.
func (t *Catalog) isAlias(s string) bool {
	_, ok := t.alias(s)
	return ok
}

// alias returns the target of the alias s, if s is one.
func (t *Catalog) alias(s string) (string, bool) {
	if target, ok := t.cfg.Aliases[s]; ok {
		return target, true
	}
	c := canonical(s)
	for a, target := range t.cfg.Aliases {
		if canonical(a) == c {
			return target, true
		}
	}
	return "", false
}

// aliasNames lists the aliases as "alias (= target)", for error messages.
func (t *Catalog) aliasNames() []string {
	out := make([]string, 0, len(t.cfg.Aliases))
	for a, target := range t.cfg.Aliases {
		out = append(out, a+" (= "+target+")")
	}
	return out
}
