// Package stats summarises samples: percentiles, medians and latency
// summaries.
package stats

import (
	"math"
	"slices"
	"time"
)

// Percentile returns the p-th percentile (0 < p <= 100) of sorted samples by
// the nearest-rank method, or NaN when there are none.
func Percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	rank = min(max(rank, 1), len(sorted))
	return sorted[rank-1]
}

// Median returns the median of xs (the mean of the two middle values for an
// even count), or NaN when there are none. xs is not modified.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// Latency summarises durations in milliseconds.
type Latency struct {
	N    int     `json:"n"`
	P50  float64 `json:"p50_ms"`
	P99  float64 `json:"p99_ms"`
	Mean float64 `json:"mean_ms"`
	Max  float64 `json:"max_ms"`
}

// Summarize returns the latency summary of nanosecond durations; the zero
// Latency (N == 0) when there are none.
func Summarize(ns []int64) Latency {
	if len(ns) == 0 {
		return Latency{}
	}
	ms := make([]float64, len(ns))
	var sum float64
	for i, d := range ns {
		ms[i] = float64(d) / float64(time.Millisecond)
		sum += ms[i]
	}
	slices.Sort(ms)
	return Latency{
		N:    len(ms),
		P50:  Percentile(ms, 50),
		P99:  Percentile(ms, 99),
		Mean: sum / float64(len(ms)),
		Max:  ms[len(ms)-1],
	}
}
