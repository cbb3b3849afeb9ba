package kernel

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/paddock-sandbox/paddock/api"
)

// collector builds a cell's execution from what its interpreter sends,
// within the bounds, and emits the events.
type collector struct {
	res     *api.CodeExecution
	emit    Emit
	maxOut  int
	maxItem int
	budget  int // bytes left for results
	stdout  strings.Builder
	stderr  strings.Builder
}

// message handles output and dropped event lines.
func (a *collector) message(mg msg) {
	switch mg.kind {
	case msgStdout:
		a.output(api.CodeEventStdout, string(mg.data))
	case msgStderr:
		a.output(api.CodeEventStderr, string(mg.data))
	case msgBadEvent:
		size, _ := strconv.ParseInt(string(mg.data), 10, 64)
		a.result(api.CodeResult{
			Data:    map[string]string{"text/plain": fmt.Sprintf("[paddock: a result of %d bytes was left out: larger than the bound or not valid]", size)},
			Omitted: map[string]int64{"application/octet-stream": size},
		})
	}
}

// event handles a driver event other than done.
func (a *collector) event(ev driverEvent) {
	switch ev.Type {
	case "stdout":
		a.output(api.CodeEventStdout, ev.Text)
	case "stderr":
		a.output(api.CodeEventStderr, ev.Text)
	case "result":
		if ev.Result != nil {
			a.result(*ev.Result)
		}
	case "error":
		if ev.Error != nil {
			e := &api.CodeError{Name: clip(ev.Error.Name, 256), Value: clip(ev.Error.Value, maxErrorText), Traceback: clip(ev.Error.Traceback, maxErrorText)}
			a.res.Error = e
			a.emit(api.CodeEvent{Type: api.CodeEventError, Error: e})
		}
	}
}

// output keeps up to maxOut bytes of a stream and emits the chunk.
func (a *collector) output(stream, text string) {
	if text == "" {
		return
	}
	b, trunc := &a.stdout, &a.res.StdoutTruncated
	if stream == api.CodeEventStderr {
		b, trunc = &a.stderr, &a.res.StderrTruncated
	}
	if room := a.maxOut - b.Len(); room >= len(text) {
		b.WriteString(text)
	} else {
		b.WriteString(text[:max(room, 0)])
		*trunc = true
	}
	if stream == api.CodeEventStderr {
		a.res.Stderr = a.stderr.String()
	} else {
		a.res.Stdout = a.stdout.String()
	}
	a.emit(api.CodeEvent{Type: stream, Text: text})
}

// note adds a line of the agent's own to stderr.
func (a *collector) note(text string) { a.output(api.CodeEventStderr, text) }

// result bounds r (each representation by maxItem, all results by the
// budget), keeps and emits it.
func (a *collector) result(r api.CodeResult) {
	out := api.CodeResult{Data: map[string]string{}, IsMainResult: r.IsMainResult}
	omitted := map[string]int64{}
	for k, v := range r.Omitted {
		if len(omitted) < 64 {
			omitted[clip(k, 256)] = v
		}
	}
	for k, v := range r.Data {
		k = clip(k, 256)
		if len(v) > a.maxItem || len(v) > a.budget {
			omitted[k] = int64(len(v))
			continue
		}
		a.budget -= len(v)
		out.Data[k] = v
	}
	if len(omitted) > 0 {
		out.Omitted = omitted
		if _, ok := out.Data["text/plain"]; !ok {
			var parts []string
			for k, n := range omitted {
				parts = append(parts, fmt.Sprintf("%s of %d bytes", k, n))
			}
			out.Data["text/plain"] = "[paddock: left out, larger than the bound: " + strings.Join(parts, ", ") + "]"
		}
	}
	a.res.Results = append(a.res.Results, out)
	a.emit(api.CodeEvent{Type: api.CodeEventResult, Result: &out})
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
