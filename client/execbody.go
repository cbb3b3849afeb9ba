package client

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/paddock-sandbox/paddock/api"
)

// stdinLast is the header of an exec body whose stdin is its last member
// (execBody): the daemon then starts the command as soon as it reaches the
// stdin and streams it into the command as it arrives.
var stdinLast = http.Header{"Paddock-Stdin-Last": {"true"}}

// execBody encodes req as JSON with stdin or stdin_base64, if set, as the
// last member.
func execBody(req api.ExecRequest) (io.Reader, error) {
	stdin, key := req.Stdin, "stdin"
	if req.StdinBase64 != "" {
		stdin, key = req.StdinBase64, "stdin_base64"
		if req.Stdin != "" {
			return jsonBody(req) // both: the daemon says what is wrong
		}
	}
	req.Stdin, req.StdinBase64 = "", ""
	head, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("encode request: %w", err)
	}
	if stdin == "" {
		return bytes.NewReader(head), nil
	}
	val, err := json.Marshal(stdin)
	if err != nil {
		return nil, fmt.Errorf("encode request: %w", err)
	}
	var b bytes.Buffer
	b.Grow(len(head) + len(key) + len(val) + 5)
	b.Write(head[:len(head)-1])
	if len(head) > 2 {
		b.WriteByte(',')
	}
	fmt.Fprintf(&b, "%q:", key)
	b.Write(val)
	b.WriteByte('}')
	return &b, nil
}
