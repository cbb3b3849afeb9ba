package template

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/paddock-sandbox/paddock/api"
)

// ContextFile is one regular file of a build context.
type ContextFile struct {
	Data []byte
	// Mode holds the permission bits (0644 when unknown).
	Mode uint32
}

// BuildContext is the files COPY and ADD read, by clean slash-separated
// relative path.
type BuildContext map[string]ContextFile

// ContextFromMap makes a build context from path → contents, as the JSON
// form of a build request carries it (every file 0644).
func ContextFromMap(m map[string][]byte) (BuildContext, error) {
	bc := BuildContext{}
	for p, data := range m {
		rel, err := contextPath(p)
		if err != nil {
			return nil, err
		}
		bc[rel] = ContextFile{Data: data, Mode: 0o644}
	}
	return bc, nil
}

// ReadContextTar reads a build context from a tar stream: regular files
// (symlinks, devices and the like are skipped), at most maxBytes of
// content and maxFiles files.
func ReadContextTar(r io.Reader, maxBytes int64, maxFiles int) (BuildContext, error) {
	bc := BuildContext{}
	tr := tar.NewReader(r)
	var total int64
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return bc, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%w: build context: %v", ErrInvalid, err)
		}
		if hdr.Typeflag != tar.TypeReg {
			continue
		}
		rel, err := contextPath(hdr.Name)
		if err != nil {
			return nil, err
		}
		if total += hdr.Size; total > maxBytes || hdr.Size < 0 {
			return nil, fmt.Errorf("%w: build context over %d bytes", ErrLimit, maxBytes)
		}
		if len(bc) >= maxFiles {
			return nil, fmt.Errorf("%w: build context over %d files", ErrLimit, maxFiles)
		}
		data, err := io.ReadAll(io.LimitReader(tr, hdr.Size))
		if err != nil {
			return nil, fmt.Errorf("%w: build context: %v", ErrInvalid, err)
		}
		bc[rel] = ContextFile{Data: data, Mode: uint32(hdr.Mode) & 0o777}
	}
}

// contextPath cleans a context path and refuses ones that climb out.
func contextPath(p string) (string, error) {
	rel := path.Clean("/" + strings.TrimPrefix(p, "./"))[1:]
	if rel == "" || strings.ContainsRune(p, 0) {
		return "", fmt.Errorf("%w: bad build context path %q", ErrInvalid, p)
	}
	if strings.HasPrefix(path.Clean(p), "../") || path.Clean(p) == ".." {
		return "", fmt.Errorf("%w: build context path %q leaves the context", ErrInvalid, p)
	}
	return rel, nil
}

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

// copyInstr turns COPY/ADD into one copy step: a single file, or an
// archive of several files unpacked into a directory.
func (p *dfParser) copyInstr(kw, rest string) error {
	words, ok := jsonForm(rest)
	if !ok {
		var err error
		if words, err = shellWords(rest); err != nil {
			return err
		}
	}
	var chmod string
	for len(words) > 0 && strings.HasPrefix(words[0], "--") {
		flag, val, _ := strings.Cut(words[0], "=")
		switch flag {
		case "--chmod":
			if _, err := ParseMode(val); err != nil {
				return err
			}
			chmod = val
		case "--chown":
			p.df.Warnings = append(p.df.Warnings, kw+" --chown is ignored: copied files are owned by root")
		case "--link":
		case "--from":
			return errors.New("COPY --from (multi-stage) is not supported")
		default:
			return fmt.Errorf("%s flag %s is not supported", kw, flag)
		}
		words = words[1:]
	}
	if len(words) < 2 {
		return fmt.Errorf("%s needs a source and a destination", kw)
	}
	for i := range words {
		w, err := p.expandRaw(words[i])
		if err != nil {
			return err
		}
		words[i] = w
	}
	srcs, dst := words[:len(words)-1], words[len(words)-1]
	dirDst := strings.HasSuffix(dst, "/") || dst == "." || dst == ".."
	dst = ResolveDir(p.wd, dst)
	type item struct {
		rel string // path below dst
		f   ContextFile
	}
	var items []item
	single := len(srcs) == 1
	for _, src := range srcs {
		if strings.Contains(src, "://") {
			return fmt.Errorf("%s from a URL is not supported", kw)
		}
		clean := path.Clean("/" + src)[1:]
		if strings.HasPrefix(path.Clean(src), "../") {
			return fmt.Errorf("source %q leaves the build context", src)
		}
		if f, ok := p.bc[clean]; ok && clean != "" {
			if kw == "ADD" && isArchive(clean) {
				tarball, err := archiveTar(clean, f.Data)
				if err != nil {
					return err
				}
				p.step(api.RecipeStep{Copy: &api.CopyStep{TarBase64: tarball, Dst: dst}})
				single = false
				continue
			}
			items = append(items, item{path.Base(clean), f})
			continue
		}
		var matched bool
		for _, name := range slices.Sorted(mapKeys(p.bc)) {
			rel, ok := under(clean, name)
			if !ok && strings.ContainsAny(clean, "*?[") {
				if m, _ := path.Match(clean, name); m {
					rel, ok = path.Base(name), true
				} else if d := matchDir(clean, name); d != "" {
					rel, ok = strings.TrimPrefix(name, d+"/"), true
					rel = path.Join(path.Base(d), rel)
				}
			}
			if ok {
				items = append(items, item{rel, p.bc[name]})
				matched = true
			}
		}
		if !matched {
			return fmt.Errorf("%s source %q is not in the build context", kw, src)
		}
		single = false
	}
	if len(items) == 0 {
		return nil // only archives
	}
	if single && len(items) == 1 {
		target := dst
		if dirDst {
			target = path.Join(dst, items[0].rel)
		}
		mode := chmod
		if mode == "" {
			mode = fmt.Sprintf("%04o", items[0].f.Mode&0o7777)
		}
		p.step(api.RecipeStep{Copy: &api.CopyStep{SrcBase64: items[0].f.Data, Dst: target, Mode: mode}})
		return nil
	}
	if len(srcs) > 1 && !dirDst {
		return fmt.Errorf("%s with several sources needs a destination directory ending in /", kw)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	var cm uint32
	if chmod != "" {
		cm, _ = ParseMode(chmod)
	}
	for _, it := range items {
		mode := it.f.Mode & 0o7777
		if chmod != "" {
			mode = cm
		}
		hdr := &tar.Header{Name: it.rel, Typeflag: tar.TypeReg, Mode: int64(mode), Size: int64(len(it.f.Data)),
			ModTime: time.Unix(0, 0)}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		tw.Write(it.f.Data)
	}
	tw.Close()
	p.step(api.RecipeStep{Copy: &api.CopyStep{TarBase64: buf.Bytes(), Dst: dst}})
	return nil
}

func mapKeys(bc BuildContext) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range bc {
			if !yield(k) {
				return
			}
		}
	}
}

// under reports whether name is inside directory dir ("" is the whole
// context) and returns its path below dir.
func under(dir, name string) (string, bool) {
	if dir == "" {
		return name, true
	}
	rel, ok := strings.CutPrefix(name, dir+"/")
	return rel, ok && rel != ""
}

// matchDir returns the directory prefix of name that pattern matches, or "".
func matchDir(pattern, name string) string {
	parts := strings.Split(name, "/")
	for i := 1; i < len(parts); i++ {
		d := strings.Join(parts[:i], "/")
		if m, _ := path.Match(pattern, d); m {
			return d
		}
	}
	return ""
}

func isArchive(name string) bool {
	for _, ext := range []string{".tar", ".tar.gz", ".tgz"} {
		if strings.HasSuffix(name, ext) {
			return true
		}
	}
	return false
}

// archiveTar returns the uncompressed tar of an ADD archive.
func archiveTar(name string, data []byte) ([]byte, error) {
	if strings.HasSuffix(name, ".tar") {
		return data, nil
	}
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("ADD %s: %v", name, err)
	}
	out, err := io.ReadAll(io.LimitReader(zr, 1<<30))
	if err != nil {
		return nil, fmt.Errorf("ADD %s: %v", name, err)
	}
	return out, nil
}

// jsonForm parses the exec form ["a", "b"].
func jsonForm(s string) ([]string, bool) {
	if !strings.HasPrefix(s, "[") {
		return nil, false
	}
	var words []string
	if err := json.Unmarshal([]byte(s), &words); err != nil {
		return nil, false
	}
	return words, true
}

// shellWords splits s into words with quotes and backslashes removed;
// "$" is kept for later expansion (single-quoted "$" becomes "\x00$" so
// that expansion leaves it alone).
func shellWords(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case c == '\\' && i+1 < len(s):
			i++
			if s[i] == '$' {
				cur.WriteString("\x00$")
			} else {
				cur.WriteByte(s[i])
			}
			inWord = true
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, errors.New("unterminated quote")
			}
			cur.WriteString(strings.ReplaceAll(s[i+1:i+1+j], "$", "\x00$"))
			i += j + 1
			inWord = true
		case c == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte(`"\$`, s[i+1]) >= 0 {
					i++
					if s[i] == '$' {
						cur.WriteString("\x00$")
						continue
					}
				}
				cur.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, errors.New("unterminated quote")
			}
			inWord = true
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

// expand substitutes $VAR, ${VAR}, ${VAR:-default} and ${VAR:+alt} with
// ARG and ENV values in s, a single unquoted word or a whole line.
func (p *dfParser) expand(s string) (string, error) {
	if !strings.Contains(s, "\x00") {
		words, err := shellWords(s)
		if err != nil {
			return "", err
		}
		s = strings.Join(words, " ")
	}
	return p.expandRaw(s)
}

// expandRaw substitutes variables in s, already split by shellWords.
func (p *dfParser) expandRaw(s string) (string, error) {
	return substitute(s, func(name string) (string, bool) { v, ok := p.vars[name]; return v, ok }, false)
}

// expandArgs substitutes only ARG values in a RUN command line, leaving
// everything else (other variables, \$) to the shell.
func (p *dfParser) expandArgs(s string) string {
	out, err := substitute(s, func(name string) (string, bool) {
		if !p.argSet[name] {
			return "", false
		}
		v, ok := p.vars[name]
		return v, ok
	}, true)
	if err != nil {
		return s
	}
	return out
}

// substitute expands $VAR, ${VAR}, ${VAR:-word} and ${VAR:+word} using
// look. In raw mode (a RUN line) unknown variables and \$ are left as
// they are; otherwise unknown variables expand to "" and "\x00$" (a
// quoted or escaped "$" marked by shellWords) becomes "$".
func substitute(s string, look func(string) (string, bool), raw bool) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == 0 && i+1 < len(s) && s[i+1] == '$':
			b.WriteByte('$')
			i++
			continue
		case raw && c == '\\' && i+1 < len(s):
			b.WriteString(s[i : i+2])
			i++
			continue
		case c != '$' || i+1 >= len(s):
			b.WriteByte(c)
			continue
		}
		start := i
		var name, op, word string
		if s[i+1] == '{' {
			end := strings.IndexByte(s[i:], '}')
			if end < 0 {
				return "", errors.New("unterminated ${")
			}
			inner := s[i+2 : i+end]
			name = inner
			if j := strings.Index(inner, ":"); j >= 0 && j+1 < len(inner) && (inner[j+1] == '-' || inner[j+1] == '+') {
				name, op, word = inner[:j], inner[j:j+2], inner[j+2:]
			}
			i += end
		} else {
			j := i + 1
			for j < len(s) && (s[j] == '_' || s[j] >= 'A' && s[j] <= 'Z' || s[j] >= 'a' && s[j] <= 'z' || j > i+1 && s[j] >= '0' && s[j] <= '9') {
				j++
			}
			if j == i+1 {
				b.WriteByte(c)
				continue
			}
			name = s[i+1 : j]
			i = j - 1
		}
		v, ok := look(name)
		switch op {
		case ":-":
			if !ok || v == "" {
				v, ok = word, true
			}
		case ":+":
			if ok && v != "" {
				v = word
			} else {
				v = ""
			}
			ok = true
		}
		if !ok && raw {
			b.WriteString(s[start : i+1])
			continue
		}
		b.WriteString(v)
	}
	return b.String(), nil
}

func validVarName(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		if c != '_' && !(c >= 'A' && c <= 'Z') && !(c >= 'a' && c <= 'z') && !(i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}
