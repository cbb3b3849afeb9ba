package template

import (
	"errors"
	"fmt"
	"strings"

	"github.com/paddock-sandbox/paddock/api"
)

// Dockerfile is the result of parsing a Dockerfile.
type Dockerfile struct {
	Recipe api.Recipe
	// Warnings name instructions that were ignored.
	Warnings []string
}

// ParseDockerfile turns a Dockerfile (one stage: FROM, RUN, COPY, ADD, ENV,
// ARG, WORKDIR, USER, CMD; LABEL, EXPOSE, MAINTAINER, VOLUME, STOPSIGNAL,
// HEALTHCHECK and ENTRYPOINT are ignored with a warning) into the recipe
// it stands for. COPY and ADD read from bc. ARG values come from args,
// else the ARG's default; they are substituted in FROM, ENV, WORKDIR,
// USER, COPY and ADD (as Docker does) and also in RUN (where Docker passes
// them as environment variables instead).
func ParseDockerfile(text string, bc BuildContext, args map[string]string) (*Dockerfile, error) {
	lines, err := logicalLines(text)
	if err != nil {
		return nil, err
	}
	p := &dfParser{bc: bc, args: args, vars: map[string]string{}, argSet: map[string]bool{}}
	for _, l := range lines {
		if err := p.instruction(l); err != nil {
			return nil, fmt.Errorf("%w: Dockerfile line %d: %v", ErrInvalid, l.n, err)
		}
	}
	if p.df.Recipe.From == "" {
		return nil, fmt.Errorf("%w: Dockerfile has no FROM", ErrInvalid)
	}
	if err := ValidateRecipe(&p.df.Recipe); err != nil {
		return nil, err
	}
	return &p.df, nil
}

type dfLine struct {
	n    int // first physical line, from 1
	text string
}

// logicalLines joins continued lines and drops comments and blank lines.
func logicalLines(text string) ([]dfLine, error) {
	escape := byte('\\')
	var out []dfLine
	var cur strings.Builder
	start := 0
	directives := true
	for i, raw := range strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n") {
		trim := strings.TrimSpace(raw)
		if directives && strings.HasPrefix(trim, "#") {
			if k, v, ok := strings.Cut(strings.TrimSpace(trim[1:]), "="); ok && strings.EqualFold(strings.TrimSpace(k), "escape") {
				switch strings.TrimSpace(v) {
				case "`":
					escape = '`'
				case "\\":
				default:
					return nil, fmt.Errorf("%w: Dockerfile line %d: bad escape directive", ErrInvalid, i+1)
				}
				continue
			}
		}
		if trim != "" && !strings.HasPrefix(trim, "#") {
			directives = false
		}
		if strings.HasPrefix(trim, "#") || (trim == "" && cur.Len() > 0) {
			continue // comments, and blank lines inside a continuation
		}
		if trim == "" {
			continue
		}
		if cur.Len() == 0 {
			start = i + 1
		}
		line := strings.TrimRight(raw, " \t")
		if line[len(line)-1] == escape {
			cur.WriteString(line[:len(line)-1])
			continue
		}
		cur.WriteString(line)
		out = append(out, dfLine{start, strings.TrimSpace(cur.String())})
		cur.Reset()
	}
	if cur.Len() > 0 {
		out = append(out, dfLine{start, strings.TrimSpace(cur.String())})
	}
	return out, nil
}

type dfParser struct {
	df     Dockerfile
	bc     BuildContext
	args   map[string]string
	vars   map[string]string // ARG and ENV values, for substitution
	argSet map[string]bool   // names declared by ARG (substituted in RUN)
	from   bool
	wd     string
}

func (p *dfParser) step(s api.RecipeStep) { p.df.Recipe.Steps = append(p.df.Recipe.Steps, s) }

func (p *dfParser) instruction(l dfLine) error {
	kw, rest := l.text, ""
	if i := strings.IndexAny(l.text, " \t"); i >= 0 {
		kw, rest = l.text[:i], l.text[i+1:]
	}
	kw = strings.ToUpper(kw)
	rest = strings.TrimSpace(rest)
	if kw != "FROM" && kw != "ARG" && !p.from {
		return fmt.Errorf("%s before FROM", kw)
	}
	if (kw == "RUN" || kw == "COPY" || kw == "ADD") && strings.Contains(rest, "<<") && heredoc(rest) {
		return errors.New("heredocs are not supported")
	}
	switch kw {
	case "FROM":
		return p.fromInstr(rest)
	case "ARG":
		return p.arg(rest)
	case "RUN":
		if rest == "" {
			return errors.New("RUN needs a command")
		}
		if strings.HasPrefix(rest, "--") {
			return fmt.Errorf("RUN flags (%s) are not supported", strings.Fields(rest)[0])
		}
		if words, ok := jsonForm(rest); ok {
			p.step(api.RecipeStep{Run: shellQuote(words...)})
			return nil
		}
		p.step(api.RecipeStep{Run: p.expandArgs(rest)})
	case "COPY", "ADD":
		return p.copyInstr(kw, rest)
	case "ENV":
		return p.env(rest)
	case "WORKDIR":
		w, err := p.expand(rest)
		if err != nil || w == "" {
			return errors.New("WORKDIR needs a path")
		}
		p.wd = ResolveDir(p.wd, w)
		p.step(api.RecipeStep{Workdir: p.wd})
	case "USER":
		u, err := p.expand(rest)
		if err != nil || u == "" {
			return errors.New("USER needs a user")
		}
		p.step(api.RecipeStep{User: u})
	case "CMD":
		if words, ok := jsonForm(rest); ok {
			if len(words) == 0 {
				return errors.New("CMD needs a command")
			}
			p.step(api.RecipeStep{Cmd: words})
		} else if rest != "" {
			p.step(api.RecipeStep{Cmd: []string{"/bin/sh", "-c", rest}})
		} else {
			return errors.New("CMD needs a command")
		}
	case "LABEL", "EXPOSE", "MAINTAINER", "VOLUME", "STOPSIGNAL", "HEALTHCHECK", "ENTRYPOINT":
		p.df.Warnings = append(p.df.Warnings, fmt.Sprintf("line %d: %s is ignored", l.n, kw))
	default:
		return fmt.Errorf("%s is not supported (supported: FROM, RUN, COPY, ADD, ENV, ARG, WORKDIR, USER, CMD)", kw)
	}
	return nil
}

// heredoc reports whether s uses a heredoc (<<WORD or <<-WORD).
func heredoc(s string) bool {
	for i := strings.Index(s, "<<"); i >= 0; {
		r := strings.TrimPrefix(s[i+2:], "-")
		r = strings.TrimLeft(r, `"'`)
		if r != "" && (r[0] == '_' || r[0] >= 'A' && r[0] <= 'Z' || r[0] >= 'a' && r[0] <= 'z') {
			return true
		}
		j := strings.Index(s[i+2:], "<<")
		if j < 0 {
			break
		}
		i += 2 + j
	}
	return false
}

func (p *dfParser) fromInstr(rest string) error {
	if p.from {
		return errors.New("multi-stage builds are not supported: use one FROM")
	}
	words, err := shellWords(rest)
	if err != nil {
		return err
	}
	for len(words) > 0 && strings.HasPrefix(words[0], "--") {
		if !strings.HasPrefix(words[0], "--platform") {
			return fmt.Errorf("FROM flag %s is not supported", words[0])
		}
		p.df.Warnings = append(p.df.Warnings, "FROM --platform is ignored")
		words = words[1:]
	}
	if len(words) == 3 && strings.EqualFold(words[1], "AS") {
		words = words[:1]
	}
	if len(words) != 1 {
		return errors.New("FROM needs one image or template")
	}
	from, err := p.expandRaw(words[0])
	if err != nil || from == "" {
		return errors.New("FROM needs one image or template")
	}
	p.df.Recipe.From = from
	p.from = true
	// ARGs declared before FROM are only for FROM.
	for k := range p.argSet {
		delete(p.vars, k)
	}
	p.argSet = map[string]bool{}
	return nil
}

func (p *dfParser) arg(rest string) error {
	words, err := shellWords(rest)
	if err != nil {
		return err
	}
	if len(words) == 0 {
		return errors.New("ARG needs a name")
	}
	for _, w := range words {
		name, def, hasDef := strings.Cut(w, "=")
		if !validVarName(name) {
			return fmt.Errorf("bad ARG name %q", name)
		}
		v, ok := p.args[name]
		if !ok && hasDef {
			if v, err = p.expandRaw(def); err != nil {
				return err
			}
			ok = true
		}
		p.argSet[name] = true
		if ok {
			p.vars[name] = v
		} else {
			delete(p.vars, name)
		}
	}
	return nil
}

func (p *dfParser) env(rest string) error {
	words, err := shellWords(rest)
	if err != nil {
		return err
	}
	if len(words) == 0 {
		return errors.New("ENV needs NAME=VALUE")
	}
	env := map[string]string{}
	if !strings.Contains(words[0], "=") {
		// Legacy form: ENV NAME the rest of the line.
		name, value, _ := strings.Cut(rest, " ")
		v, err := p.expand(strings.TrimSpace(value))
		if err != nil {
			return err
		}
		if !validVarName(name) {
			return fmt.Errorf("bad ENV name %q", name)
		}
		env[name] = v
	} else {
		for _, w := range words {
			name, value, ok := strings.Cut(w, "=")
			if !ok || !validVarName(name) {
				return fmt.Errorf("bad ENV item %q", w)
			}
			v, err := p.expandRaw(value)
			if err != nil {
				return err
			}
			env[name] = v
		}
	}
	for k, v := range env {
		p.vars[k] = v
	}
	p.step(api.RecipeStep{Env: env})
	return nil
}
