package agent_test

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/internal/agent"
)

// BenchmarkAgentExecStdin times `wc -c` fed 1 MiB and 16 MiB of stdin
// through the daemon's agent client, the old way (the stdin in the JSON
// request, decoded whole by the agent: Client.Exec) and streamed
// (Client.ExecStdin), interleaved, b.N times each, and prints medians,
// p99s and the ratio.
func BenchmarkAgentExecStdin(b *testing.B) {
	c, _ := stdinClient(b, agent.Config{}, false)
	ctx := context.Background()
	pct := func(d []time.Duration, p int) time.Duration {
		s := slices.Clone(d)
		slices.Sort(s)
		return s[min(len(s)-1, len(s)*p/100)]
	}
	fmt.Println()
	for _, size := range []int{1 << 20, 16 << 20} {
		stdin := bytes.Repeat([]byte("0123456789abcdef"), size/16)
		want := strconv.Itoa(size) + "\n"
		var tJSON, tStream []time.Duration
		for range b.N {
			t0 := time.Now()
			res, err := c.Exec(ctx, "sb", &api.ExecRequest{Argv: []string{"wc", "-c"}, Stdin: string(stdin)})
			if err != nil || res.Stdout != want {
				b.Fatalf("json: %+v %v", res, err)
			}
			tJSON = append(tJSON, time.Since(t0))
			t0 = time.Now()
			res, err = c.ExecStdin(ctx, "sb", &api.ExecRequest{Argv: []string{"wc", "-c"}}, bytes.NewReader(stdin), int64(size))
			if err != nil || res.Stdout != want {
				b.Fatalf("streamed: %+v %v", res, err)
			}
			tStream = append(tStream, time.Since(t0))
		}
		fmt.Printf("agent exec wc -c, %d MiB stdin: in the JSON body median %.1f ms p99 %.1f ms; streamed median %.1f ms p99 %.1f ms; streamed/JSON %.2f× over %d\n",
			size>>20, ms(pct(tJSON, 50)), ms(pct(tJSON, 99)), ms(pct(tStream, 50)), ms(pct(tStream, 99)),
			float64(pct(tStream, 50))/float64(pct(tJSON, 50)), b.N)
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
