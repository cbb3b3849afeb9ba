package agent

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"net/http/httptest"
	"testing"

	"github.com/paddock-sandbox/paddock/api"
)

// TestWriteExecResultMatchesEncodingJSON checks that the streamed answer
// is byte for byte what encoding/json writes, for output split into
// chunks at every kind of place (inside UTF-8 sequences too).
func TestWriteExecResultMatchesEncodingJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := [][]byte{[]byte("a"), []byte("<&>\"\\\n\t\r\b\f\x00\x1f\x7f"), []byte("é"), []byte("€"), []byte("𝄞"),
		[]byte("\u2028\u2029"), {0xff}, {0xe2, 0x82}, {0xf0, 0x9d}, {0x80}, {0xc3}}
	sig := "SIGKILL"
	code := 3
	for i := range 500 {
		var out [2][]byte
		var chunks []chunk
		for range rng.IntN(40) {
			s := stream(rng.IntN(2))
			var piece []byte
			for range rng.IntN(6) + 1 {
				piece = append(piece, alphabet[rng.IntN(len(alphabet))]...)
			}
			out[s] = append(out[s], piece...)
			chunks = append(chunks, chunk{s: s, data: piece})
		}
		res := api.ExecResult{ExitCode: &code, StdoutBytes: int64(len(out[0])), StdoutTruncated: i%2 == 0, DurationMS: 12}
		if i%3 == 0 {
			res.ExitCode, res.Signal = nil, &sig
		}
		want := res
		want.Stdout, want.Stderr = string(out[0]), string(out[1])
		var wantBuf bytes.Buffer
		if err := json.NewEncoder(&wantBuf).Encode(&want); err != nil {
			t.Fatal(err)
		}
		rec := httptest.NewRecorder()
		if err := writeExecResult(rec, &res, chunks); err != nil {
			t.Fatal(err)
		}
		if got := rec.Body.Bytes(); !bytes.Equal(got, wantBuf.Bytes()) {
			t.Fatalf("case %d (%q / %q):\n got %s\nwant %s", i, out[0], out[1], got, wantBuf.Bytes())
		}
	}
}
