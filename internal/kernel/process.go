package kernel

import (
	"bufio"
	"bytes"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/paddock-sandbox/paddock/api"
	"golang.org/x/sys/unix"
)

var (
	//go:embed drivers/python.py
	pythonDriver string
	//go:embed drivers/node.js
	nodeDriver string
	//go:embed drivers/bash.sh
	bashDriver string
)

// language is how one language's interpreter starts and takes a cell.
type language struct {
	name   string
	binary string                   // looked up in the context's PATH
	args   []string                 // after argv[0]
	encode func(req wireReq) []byte // one request on fd 3
}

// wireReq is a request to a driver.
type wireReq struct {
	Code string            `json:"code"`
	Env  map[string]string `json:"env,omitempty"`
}

func jsonLine(req wireReq) []byte {
	b, _ := json.Marshal(req)
	return append(b, '\n')
}

// bashCell is the cell's code after `export` lines for req.Env, ended by
// NUL (validated code has none).
func bashCell(req wireReq) []byte {
	var b strings.Builder
	for k, v := range req.Env {
		fmt.Fprintf(&b, "export %s=%s\n", k, shellQuote(v))
	}
	b.WriteString(req.Code)
	b.WriteByte(0)
	return []byte(b.String())
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

var languages = map[string]*language{
	api.LanguagePython:     {name: api.LanguagePython, binary: "python3", args: []string{"-u", "-c", pythonDriver}, encode: jsonLine},
	api.LanguageJavascript: {name: api.LanguageJavascript, binary: "node", args: []string{"--expose-internals", "--no-warnings", "-e", nodeDriver}, encode: jsonLine},
	api.LanguageBash:       {name: api.LanguageBash, binary: "bash", args: []string{"--norc", "--noprofile", "-c", bashDriver}, encode: bashCell},
}

// lookupLanguage resolves a requested language name ("" is python).
func lookupLanguage(name string) (*language, error) {
	switch strings.ToLower(name) {
	case "", "python", "python3", "py":
		return languages[api.LanguagePython], nil
	case "javascript", "js", "node":
		return languages[api.LanguageJavascript], nil
	case "bash", "sh", "shell":
		return languages[api.LanguageBash], nil
	case "typescript", "ts":
		return nil, errorf(api.CodeNotSupported, "typescript is not supported: this Node cannot strip types")
	}
	return nil, badRequest("unknown language %q (python, javascript or bash)", name)
}

// msgKind says what a msg from a process's readers carries.
type msgKind int

const (
	msgStdout msgKind = iota
	msgStderr
	msgEvent      // a decoded driver event
	msgMarkOut    // the marker on stdout
	msgMarkErr    // the marker on stderr
	msgEOF        // one of the three pipes ended
	msgBadEvent   // an event line that was too long or not JSON
	readChunk     = 32 << 10
	eventOverhead = 1 << 20
)

// msg is one thing read from a process.
type msg struct {
	kind msgKind
	data []byte
	ev   driverEvent
}

// driverEvent is one line a driver writes on fd 4.
type driverEvent struct {
	Type   string          `json:"type"`
	Text   string          `json:"text,omitempty"`
	Result *api.CodeResult `json:"result,omitempty"`
	Error  *api.CodeError  `json:"error,omitempty"`
	Count  int             `json:"execution_count,omitempty"`
}

// process is one running interpreter.
type process struct {
	pid    int
	cmd    *os.File        // fd 3 of the driver
	msgs   chan msg        // from the readers
	exited <-chan struct{} // closed when the process has been reaped
	eofs   int             // pipes ended, counted by the one reader of msgs
}

// start starts lang's interpreter in dir with env.
func (m *Manager) start(lang *language, dir string, env []string) (*process, error) {
	path, err := lookPath(lang.binary, env, dir)
	if err != nil {
		return nil, err
	}
	nonce := make([]byte, 16)
	_, _ = rand.Read(nonce)
	marker := []byte("\x1ePADDOCK-" + hex.EncodeToString(nonce) + "\x1e")
	env = append(env, "PADDOCK_KERNEL_MARKER="+string(marker), "PADDOCK_KERNEL_MAX_ITEM="+strconv.Itoa(m.cfg.MaxItemBytes))

	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", os.DevNull, err)
	}
	var pipes [4][2]*os.File // stdout, stderr, cmd, events
	closeAll := func() {
		devnull.Close()
		for _, p := range pipes {
			for _, f := range p {
				if f != nil {
					f.Close()
				}
			}
		}
	}
	for i := range pipes {
		r, w, err := os.Pipe()
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("pipe: %w", err)
		}
		pipes[i] = [2]*os.File{r, w}
	}
	child := []*os.File{devnull, pipes[0][1], pipes[1][1], pipes[2][0], pipes[3][1]}
	fds := make([]uintptr, len(child))
	for i, f := range child {
		fds[i] = f.Fd()
	}
	argv := append([]string{lang.binary}, lang.args...)
	pid, exited, err := m.cfg.Start(path, argv, &syscall.ProcAttr{Dir: dir, Env: env, Files: fds, Sys: &syscall.SysProcAttr{Setpgid: true}})
	devnull.Close()
	for i := range pipes {
		end := 1 // the child's end: write for output pipes, read for cmd
		if i == 2 {
			end = 0
		}
		pipes[i][end].Close()
		pipes[i][end] = nil
	}
	if err != nil {
		closeAll()
		return nil, fmt.Errorf("start %s: %w", path, err)
	}
	p := &process{pid: pid, cmd: pipes[2][1], msgs: make(chan msg, 64), exited: exited}
	go readOutput(p.msgs, pipes[0][0], marker, msgStdout, msgMarkOut)
	go readOutput(p.msgs, pipes[1][0], marker, msgStderr, msgMarkErr)
	go readEvents(p.msgs, pipes[3][0], m.cfg.MaxResultsBytes*4/3+eventOverhead)
	return p, nil
}

// send writes one request to the driver.
func (p *process) send(b []byte) error {
	_ = p.cmd.SetWriteDeadline(time.Now().Add(10 * time.Second))
	_, err := p.cmd.Write(b)
	return err
}

// kill ends the interpreter and its process group, and waits up to d for it.
func (p *process) kill(d time.Duration) {
	_ = unix.Kill(-p.pid, unix.SIGKILL)
	_ = unix.Kill(p.pid, unix.SIGKILL)
	p.cmd.Close()
	select {
	case <-p.exited:
	case <-time.After(d):
	}
}

// drain reads and drops what the readers still send until all three
// pipes ended, so that they do not block forever.
func (p *process) drain() {
	for p.eofs < 3 {
		if m := <-p.msgs; m.kind == msgEOF {
			p.eofs++
		}
	}
}

// interrupt sends SIGINT to the interpreter's process group.
func (p *process) interrupt() { _ = unix.Kill(-p.pid, unix.SIGINT) }

// readOutput forwards f's bytes as kind messages, with every occurrence of
// marker taken out and reported as mark.
func readOutput(out chan<- msg, f *os.File, marker []byte, kind, mark msgKind) {
	defer f.Close()
	buf := make([]byte, readChunk)
	var pending []byte // a tail that may be the start of the marker
	for {
		n, err := f.Read(buf)
		if n > 0 {
			data := append(pending, buf[:n]...)
			pending = nil
			for {
				i := bytes.Index(data, marker)
				if i < 0 {
					break
				}
				if i > 0 {
					out <- msg{kind: kind, data: bytes.Clone(data[:i])}
				}
				out <- msg{kind: mark}
				data = data[i+len(marker):]
			}
			keep := partialSuffix(data, marker)
			if len(data)-keep > 0 {
				out <- msg{kind: kind, data: bytes.Clone(data[:len(data)-keep])}
			}
			pending = bytes.Clone(data[len(data)-keep:])
		}
		if err != nil {
			if len(pending) > 0 {
				out <- msg{kind: kind, data: pending}
			}
			out <- msg{kind: msgEOF}
			return
		}
	}
}

// partialSuffix is the length of the longest suffix of data that is a
// proper prefix of marker.
func partialSuffix(data, marker []byte) int {
	for k := min(len(marker)-1, len(data)); k > 0; k-- {
		if bytes.HasPrefix(marker, data[len(data)-k:]) {
			return k
		}
	}
	return 0
}

// readEvents decodes the driver's event lines, each at most limit bytes;
// a longer or invalid line is dropped and reported as msgBadEvent with its
// size.
func readEvents(out chan<- msg, f *os.File, limit int) {
	defer f.Close()
	r := bufio.NewReaderSize(f, 64<<10)
	for {
		line, size, err := readLine(r, limit)
		if size > 0 {
			var ev driverEvent
			if line == nil || json.Unmarshal(line, &ev) != nil {
				out <- msg{kind: msgBadEvent, data: []byte(strconv.Itoa(size))}
			} else {
				out <- msg{kind: msgEvent, ev: ev}
			}
		}
		if err != nil {
			out <- msg{kind: msgEOF}
			return
		}
	}
}

// readLine reads one line of at most limit bytes (without its newline).
// A longer line is read to its end and returned as nil with its size.
func readLine(r *bufio.Reader, limit int) ([]byte, int, error) {
	var line []byte
	size := 0
	for {
		chunk, err := r.ReadSlice('\n')
		size += len(chunk)
		if size <= limit {
			line = append(line, chunk...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if size > limit {
			return nil, size, err
		}
		return bytes.TrimSuffix(line, []byte("\n")), size, err
	}
}

// lookPath finds file in the PATH of env, relative entries from dir.
func lookPath(file string, env []string, dir string) (string, error) {
	pathEnv := "/usr/local/bin:/usr/bin:/bin"
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			pathEnv = v
		}
	}
	for _, d := range filepath.SplitList(pathEnv) {
		if !filepath.IsAbs(d) {
			d = filepath.Join(dir, d)
		}
		p := filepath.Join(d, file)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode().Perm()&0o111 != 0 {
			return p, nil
		}
	}
	return "", errorf(api.CodeNotSupported, "%s is not installed in this sandbox (not found in PATH)", file)
}
