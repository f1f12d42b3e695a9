package report

import (
	"fmt"
	"io"
	"strings"
)

// FloorPairs are the systems measured against a floor (bench/internal/floorsys)
// of the same run: each lock service with the floor on its log store.
var FloorPairs = [][2]string{{"raftlock", "raft-floor"}, {"raftlock-wal", "raft-floor-wal"}}

// WriteFloorShares writes, for every metric that a pair of FloorPairs has
// both medians of, the lock service's median against its floor's: a rate
// (higher is better) as a share of the floor's — what the service keeps of
// what the architecture reaches on the machine — and a cost (CPU, wake-ups,
// latency) as a multiple of it — what the service adds. It writes nothing
// when no pair ran.
func WriteFloorShares(w io.Writer, metrics []*Metric) error {
	var pairs [][2]string
	for _, p := range FloorPairs {
		for _, m := range metrics {
			if !m.Hidden && len(m.Runs[p[0]]) > 0 && len(m.Runs[p[1]]) > 0 {
				pairs = append(pairs, p)
				break
			}
		}
	}
	if len(pairs) == 0 {
		return nil
	}
	var b strings.Builder
	b.WriteString("| workload | metric |")
	for _, p := range pairs {
		fmt.Fprintf(&b, " %s of %s |", p[0], p[1])
	}
	b.WriteString("\n|---|---|" + strings.Repeat("--:|", len(pairs)) + "\n")
	for _, m := range metrics {
		if m.Hidden {
			continue
		}
		cells, have := make([]string, len(pairs)), false
		for i, p := range pairs {
			cells[i] = "n/a"
			r, ok := m.Ratio(p[0], p[1])
			switch {
			case ok && m.Higher:
				cells[i], have = fmt.Sprintf("%.0f %%", 100*r), true
			case ok:
				cells[i], have = fmt.Sprintf("%.2f×", r), true
			}
		}
		if have {
			fmt.Fprintf(&b, "| %s | %s | %s |\n", m.Workload, m.Name, strings.Join(cells, " | "))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
