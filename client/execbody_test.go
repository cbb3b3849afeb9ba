package client

import (
	"bytes"
	"encoding/json"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/paddock-sandbox/paddock/api"
)

// TestExecBody checks that the exec body decodes to its request, with the
// stdin last.
func TestExecBody(t *testing.T) {
	for _, req := range []api.ExecRequest{
		{Argv: []string{"wc", "-c"}, Stdin: "a\"\n\xffé", TimeoutSeconds: 3, MaxOutputBytes: 10},
		{Command: "cat", StdinBase64: "AAE=", Env: map[string]string{"A": "b"}},
		{Argv: []string{"true"}},
		{Stdin: "only"},
		{Argv: []string{"x"}, Stdin: "a", StdinBase64: "YQ=="},
	} {
		r, err := execBody(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(r)
		var got api.ExecRequest
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&got); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		want := req
		want.Stdin = strings.ToValidUTF8(want.Stdin, "\uFFFD")
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s decodes to %+v, want %+v", b, got, want)
		}
		if req.Stdin != "" && req.StdinBase64 == "" && !bytes.Contains(b, []byte(`,"stdin":`)) && !bytes.HasPrefix(b, []byte(`{"stdin":`)) {
			t.Fatalf("%s: stdin not last", b)
		}
	}
}
