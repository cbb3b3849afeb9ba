package agent

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"unicode/utf8"

	"github.com/paddock-sandbox/paddock/api"
)

// jsonOutBufBytes is the write buffer of a streamed JSON answer.
const jsonOutBufBytes = 32 << 10

// writeExecResult answers with res as JSON, its stdout and stderr taken
// from chunks and escaped as they are written, so that the answer costs
// the agent a small buffer on top of the kept output, however large that
// is. The bytes are those encoding/json writes for res with Stdout and
// Stderr filled in.
func writeExecResult(w http.ResponseWriter, res *api.ExecResult, chunks []chunk) error {
	env := *res
	env.Stdout, env.Stderr = "", ""
	head, err := json.Marshal(&env)
	if err != nil {
		return fmt.Errorf("encode result: %w", err)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriterSize(w, jsonOutBufBytes)
	for _, f := range []struct {
		key string
		s   stream
	}{{`"stdout":""`, streamStdout}, {`"stderr":""`, streamStderr}} {
		before, after, ok := bytes.Cut(head, []byte(f.key))
		if !ok {
			return fmt.Errorf("encode result: no %s in %s", f.key, head)
		}
		bw.Write(before)
		bw.WriteString(f.key[:len(f.key)-1])
		e := jsonStringWriter{w: bw}
		for _, c := range chunks {
			if c.s == f.s {
				e.write(c.data)
			}
		}
		e.flush()
		bw.WriteByte('"')
		head = after
	}
	bw.Write(head)
	bw.WriteByte('\n')
	return bw.Flush()
}

// jsonStringWriter writes the inside of a JSON string for bytes given in
// pieces, exactly as encoding/json escapes a Go string (HTML characters
// escaped, invalid UTF-8 as U+FFFD, U+2028 and U+2029 escaped). A UTF-8
// sequence split across pieces is held until its end arrives.
type jsonStringWriter struct {
	w       *bufio.Writer
	pending [utf8.UTFMax]byte
	npend   int
}

const hexDigits = "0123456789abcdef"

// write escapes p.
func (e *jsonStringWriter) write(p []byte) {
	for e.npend > 0 && len(p) > 0 {
		var buf [2 * utf8.UTFMax]byte
		held := e.npend
		n := copy(buf[:], e.pending[:held])
		n += copy(buf[n:], p[:min(len(p), utf8.UTFMax)])
		if !utf8.FullRune(buf[:n]) { // all of p taken, still incomplete
			e.npend = copy(e.pending[:], buf[:n])
			return
		}
		if _, size := utf8.DecodeRune(buf[:n]); size > held {
			e.npend = 0
			e.escape(buf[:size], true)
			p = p[size-held:]
			continue
		}
		// Invalid: the first held byte is one U+FFFD; retry the rest.
		e.escape(buf[:1], true)
		copy(e.pending[:], e.pending[1:held])
		e.npend = held - 1
	}
	e.escape(p, false)
}

// flush writes a held incomplete sequence (invalid: one U+FFFD per byte).
func (e *jsonStringWriter) flush() {
	if e.npend > 0 {
		n := e.npend
		e.npend = 0
		e.escape(e.pending[:n], true)
	}
}

// escape writes p escaped; unless final, an incomplete sequence at its end
// is held for the next piece.
func (e *jsonStringWriter) escape(p []byte, final bool) {
	start := 0
	for i := 0; i < len(p); {
		if b := p[i]; b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' && b != '<' && b != '>' && b != '&' {
				i++
				continue
			}
			e.w.Write(p[start:i])
			switch b {
			case '\\', '"':
				e.w.Write([]byte{'\\', b})
			case '\b':
				e.w.WriteString(`\b`)
			case '\f':
				e.w.WriteString(`\f`)
			case '\n':
				e.w.WriteString(`\n`)
			case '\r':
				e.w.WriteString(`\r`)
			case '\t':
				e.w.WriteString(`\t`)
			default:
				e.w.Write([]byte{'\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF]})
			}
			i++
			start = i
			continue
		}
		if !final && !utf8.FullRune(p[i:]) {
			e.w.Write(p[start:i])
			e.npend = copy(e.pending[:], p[i:])
			return
		}
		r, size := utf8.DecodeRune(p[i:])
		if r == utf8.RuneError && size == 1 {
			e.w.Write(p[start:i])
			e.w.WriteString(`\ufffd`)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			e.w.Write(p[start:i])
			e.w.WriteString(`\u202`)
			e.w.WriteByte(hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	e.w.Write(p[start:])
}
