package workload

import (
	"slices"

	"github.com/raftlock/raftlock/bench/internal/report"
	"github.com/raftlock/raftlock/bench/internal/stats"
)

// Result is one run of one workload on one system.
type Result struct {
	Samples []report.Sample
	Notes   []string // diagnostics worth reporting: errors seen, anomalies
	// CDFs are latency distributions of the run, for the charts.
	CDFs []report.CDF
}

// cdf summarises nanosecond latencies as the distribution named name: its
// percentiles 1..100 (and 99.9) in milliseconds.
func cdf(name string, ns []int64) []report.CDF {
	if len(ns) == 0 {
		return nil
	}
	ms := make([]float64, len(ns))
	for i, v := range ns {
		ms[i] = float64(v) / 1e6
	}
	slices.Sort(ms)
	c := report.CDF{Name: name}
	for q := 1; q <= 100; q++ {
		c.P = append(c.P, float64(q))
		c.MS = append(c.MS, stats.Percentile(ms, float64(q)))
		if q == 99 {
			c.P = append(c.P, 99.9)
			c.MS = append(c.MS, stats.Percentile(ms, 99.9))
		}
	}
	return []report.CDF{c}
}
