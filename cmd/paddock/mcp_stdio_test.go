package main

import (
	"bytes"
	"io"
	"strings"
	"testing"
)

// TestMCPStdioDrain: stdin's end reaches the transport only once every
// request read has been answered; notifications and answers to unknown
// ids do not hold it.
func TestMCPStdioDrain(t *testing.T) {
	in := strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize"}` + "\n" +
		`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n" +
		`{"jsonrpc":"2.0","id":"b","method":"tools/call"}` + "\n")
	var out bytes.Buffer
	s := newMCPStdio(in, &out)
	r, w := s.reader(), s.writer()
	got, err := io.ReadAll(io.LimitReader(r, int64(in.Len())))
	if err != nil || bytes.Count(got, []byte("\n")) != 3 {
		t.Fatalf("read %q %v", got, err)
	}
	eof := make(chan error, 1)
	go func() { _, err := r.Read(make([]byte, 10)); eof <- err }()
	steps := []string{
		`{"jsonrpc":"2.0","id":1,"result":{}}`,
		`{"jsonrpc":"2.0","id":7,"result":{}}`, // not a request it read
		`{"jsonrpc":"2.0","id":"b","result"` + `:{}}`,
	}
	for i, line := range steps {
		select {
		case err := <-eof:
			t.Fatalf("EOF (%v) before step %d was answered", err, i)
		default:
		}
		// Written in two pieces: lines are reassembled.
		w.Write([]byte(line[:5]))
		w.Write([]byte(line[5:] + "\n"))
	}
	if err := <-eof; err != io.EOF {
		t.Fatalf("after the answers: %v, want EOF", err)
	}
	if !strings.Contains(out.String(), `"id":"b"`) {
		t.Fatalf("output %q", out.String())
	}
}
