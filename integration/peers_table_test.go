package integration

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
)

// fpct is pct for float samples.
func fpct(s []float64, p int) float64 {
	s = slices.Clone(s)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	return s[max(0, min(len(s)-1, i-1))]
}

// peerFigure formats a cell's median and p99; ok is false for n/a.
func peerFigure(row peerRow, c peerCell) (med, p99 string, ok bool) {
	if c.na != "" || len(c.samples) == 0 {
		return "n/a", "", false
	}
	prec := map[string]int{"ms": 1, "cycles/s": 1, "MiB": 2}[row.unit]
	if _, known := map[string]bool{"ms": true, "cycles/s": true, "MiB": true}[row.unit]; !known {
		prec = 3
	}
	med = fmt.Sprintf("%.*f", prec, fpct(c.samples, 50))
	switch {
	case row.higher && c.p99ms > 0:
		p99 = fmt.Sprintf("%.0f ms/cycle", c.p99ms)
	case len(c.samples) > 1:
		p99 = fmt.Sprintf("%.*f", prec, fpct(c.samples, 99))
	default:
		p99 = "–"
	}
	return med, p99, true
}

// peerRatio is how many times the peer's cost is Paddock's (time, memory,
// CPU; for rates Paddock's rate over the peer's): above 1, Paddock does
// better.
func peerRatio(row peerRow, paddock, peer peerCell) string {
	if paddock.na != "" || peer.na != "" || len(paddock.samples) == 0 || len(peer.samples) == 0 {
		return ""
	}
	a, b := fpct(paddock.samples, 50), fpct(peer.samples, 50)
	if row.higher {
		a, b = b, a
	}
	if a <= 0 {
		return ""
	}
	return fmt.Sprintf("%.2f×", b/a)
}

// printPeerTable prints rows as a Markdown table, tools[0] (Paddock) first
// and every other tool with its ratio, then the reasons of every n/a.
func printPeerTable(w io.Writer, tools []peerTool, rows []peerRow) {
	head := []string{"measure", "unit"}
	for j, t := range tools {
		head = append(head, t.name()+" median", "p99")
		if j > 0 {
			head = append(head, t.name()+" ÷ Paddock")
		}
	}
	fmt.Fprintf(w, "| %s |\n|%s\n", strings.Join(head, " | "), strings.Repeat(" --- |", len(head)))
	var notes []string
	for _, row := range rows {
		cols := []string{row.name, row.unit}
		for j, t := range tools {
			med, p99, ok := peerFigure(row, row.cells[j])
			if !ok {
				notes = append(notes, fmt.Sprintf("- %s, %s: n/a (%s)", t.name(), row.name, row.cells[j].na))
			}
			cols = append(cols, med, p99)
			if j > 0 {
				cols = append(cols, peerRatio(row, row.cells[0], row.cells[j]))
			}
		}
		fmt.Fprintf(w, "| %s |\n", strings.Join(cols, " | "))
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "÷ Paddock: the peer's median time, memory or CPU over Paddock's (for cycles/s, Paddock's rate over the peer's); above 1, Paddock does better.")
	for _, n := range notes {
		fmt.Fprintln(w, n)
	}
}

// namedPeer is a peerTool with only a name, for TestPeerTable.
type namedPeer struct{ peerTool }

func (n namedPeer) name() string { return "podman" }

func TestPeerTable(t *testing.T) {
	tools := []peerTool{&paddockPeer{}, namedPeer{}}
	rows := []peerRow{
		{name: "exec", unit: "ms", cells: []peerCell{{samples: []float64{10, 12, 11}}, {samples: []float64{30, 33, 36}}}},
		{name: "cycles", unit: "cycles/s", higher: true, cells: []peerCell{{samples: []float64{20, 21}, p99ms: 300}, {samples: []float64{10, 10.5}, p99ms: 900}}},
		{name: "exec-in", unit: "ms", cells: []peerCell{{samples: []float64{5}}, {na: "cannot"}}},
		{name: "idle", unit: "% of a core", cells: []peerCell{{samples: []float64{0.25}}, {samples: []float64{0.5}}}},
	}
	var sb strings.Builder
	printPeerTable(&sb, tools, rows)
	out := sb.String()
	for _, want := range []string{
		"| exec | ms | 11.0 | 12.0 | 33.0 | 36.0 | 3.00× |",
		"| cycles | cycles/s | 20.0 | 300 ms/cycle | 10.0 | 900 ms/cycle | 2.00× |",
		"| exec-in | ms | 5.0 | – | n/a |  |  |",
		"| idle | % of a core | 0.250 | – | 0.500 | – | 2.00× |",
		"- podman, exec-in: n/a (cannot)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}
