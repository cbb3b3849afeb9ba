package integration

import (
	"net/http/httptest"
	"regexp"
	"testing"

	"github.com/paddock-sandbox/paddock/internal/fakemodel"
	"github.com/paddock-sandbox/paddock/tooluse"
)

// TestToolUseChart: a model asks run_code for a chart and gets the figure
// back as an image block (Anthropic, Responses) or a note (Chat).
func TestToolUseChart(t *testing.T) {
	requireDaemon(t)
	cases := []struct {
		name   string
		run    toolUseRun
		answer string
	}{
		{"anthropic", anthropicRun(false), `^The chart is a 640x480 PNG; the sum is 45\.$`},
		{"anthropic-streaming", anthropicRun(true), `^The chart is a 640x480 PNG; the sum is 45\.$`},
		{"responses", responsesRun, `^The chart is a 640x480 PNG; the sum is 45\.$`},
		{"chat-completions", chatRun, `^The chart was made \(not visible here\); the sum is 45\.$`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fake := fakemodel.New(fakemodel.Chart())
			srv := httptest.NewServer(fake)
			defer srv.Close()
			session := tooluse.NewSession(shared.client(0), tooluse.Options{Tools: tooluse.AllToolNames()})
			defer session.Close()
			answer, err := tc.run(ctxT(t), srv.URL, session)
			if err != nil {
				t.Fatal(err)
			}
			if !regexp.MustCompile(tc.answer).MatchString(answer) {
				t.Fatalf("answer %q", answer)
			}
		})
	}
}
