package server

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"unicode/utf8"

	"github.com/paddock-sandbox/paddock/internal/sandbox"
)

// jsonStringChunk is how much of a JSON string jsonString decodes at once.
const jsonStringChunk = 64 << 10

// jsonString reads the value of a JSON string as it arrives: the bytes
// encoding/json would decode it into (escapes resolved, invalid UTF-8 as
// U+FFFD), a chunk at a time. Its reader is positioned after the opening
// quote; Read returns io.EOF after the closing quote.
type jsonString struct {
	br      *bufio.Reader
	raw     []byte // the raw chunk being gathered
	carry   []byte // an incomplete UTF-8 sequence at the end of the last chunk
	pending []byte // decoded, not yet returned
	done    bool   // the closing quote was read
	err     error
}

func newJSONString(br *bufio.Reader) *jsonString {
	return &jsonString{br: br, raw: make([]byte, 0, jsonStringChunk+16)}
}

func (s *jsonString) Read(p []byte) (int, error) {
	for len(s.pending) == 0 {
		if s.err != nil {
			return 0, s.err
		}
		if s.done {
			return 0, io.EOF
		}
		s.err = s.fill()
	}
	n := copy(p, s.pending)
	s.pending = s.pending[n:]
	return n, nil
}

func badString(format string, a ...any) error {
	return fmt.Errorf("%w: stdin: "+format, append([]any{sandbox.ErrInvalid}, a...)...)
}

// fill gathers the next raw chunk (never cut inside an escape, a
// surrogate pair or a UTF-8 sequence) and decodes it into pending.
func (s *jsonString) fill() error {
	raw := append(s.raw[:0], s.carry...)
	s.carry = s.carry[:0]
	carried := len(raw)
	escaped := false
	// Gather up to a chunk, but hand on what has arrived rather than wait
	// for more: the command reads its stdin as the client sends it.
	for len(raw) < jsonStringChunk && !s.done && (len(raw) == carried || s.br.Buffered() > 0) {
		buf, err := s.br.Peek(max(1, min(s.br.Buffered(), jsonStringChunk-len(raw))))
		if len(buf) == 0 {
			if err == io.EOF {
				return badString("the body ended inside the string")
			}
			return err
		}
		i := 0
		for i < len(buf) && buf[i] != '"' && buf[i] != '\\' && buf[i] >= 0x20 {
			i++
		}
		raw = append(raw, buf[:i]...)
		_, _ = s.br.Discard(i)
		if i == len(buf) {
			continue
		}
		switch c := buf[i]; {
		case c == '"':
			_, _ = s.br.Discard(1)
			s.done = true
		case c == '\\':
			esc, err := s.escape()
			if err != nil {
				return err
			}
			raw = append(raw, esc...)
			escaped = true
		default:
			return badString("control character %#x in string", c)
		}
	}
	if !s.done {
		// Keep an incomplete UTF-8 sequence for the next chunk.
		for k := 1; k <= utf8.UTFMax-1 && k <= len(raw); k++ {
			if c := raw[len(raw)-k]; c >= 0xC0 {
				if !utf8.FullRune(raw[len(raw)-k:]) {
					s.carry = append(s.carry, raw[len(raw)-k:]...)
					raw = raw[:len(raw)-k]
				}
				break
			} else if c < 0x80 {
				break
			}
		}
	}
	s.raw = raw
	if !escaped && utf8.Valid(raw) {
		s.pending = raw
		return nil
	}
	quoted := make([]byte, 0, len(raw)+2)
	quoted = append(append(append(quoted, '"'), raw...), '"')
	var out string
	if err := json.Unmarshal(quoted, &out); err != nil {
		return badString("%v", err)
	}
	s.pending = []byte(out)
	return nil
}

// escape reads one escape sequence (and the low half of a surrogate pair
// after a high one) raw.
func (s *jsonString) escape() ([]byte, error) {
	head, err := s.br.Peek(2)
	if err != nil {
		return nil, badString("the body ended inside an escape")
	}
	n := 2
	if head[1] == 'u' {
		n = 6
		if b, err := s.br.Peek(12); err == nil && isHighSurrogate(b[2:6]) && b[6] == '\\' && b[7] == 'u' {
			n = 12
		}
	}
	b, err := s.br.Peek(n)
	if err != nil {
		return nil, badString("the body ended inside an escape")
	}
	esc := append([]byte(nil), b...)
	_, _ = s.br.Discard(n)
	return esc, nil
}

// isHighSurrogate reports whether the 4 hex digits h are D800-DBFF.
func isHighSurrogate(h []byte) bool {
	return (h[0] == 'd' || h[0] == 'D') && (h[1] == '8' || h[1] == '9' || h[1] == 'a' || h[1] == 'A' || h[1] == 'b' || h[1] == 'B')
}
