// Dockerfile words: exec-form JSON, shell words and variable substitution.

package template

import (
	"encoding/json"
	"errors"
	"strings"
)

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
