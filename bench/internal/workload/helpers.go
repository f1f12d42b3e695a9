package workload

import (
	"math"
	"time"

	"github.com/raftlock/raftlock/bench/internal/stats"
)

// defaultLeaderWait bounds the wait for a leader to be known.
const defaultLeaderWait = 30 * time.Second

// nanIfEmpty returns v, or NaN (dropped from the report) without samples.
func nanIfEmpty(l stats.Latency, v float64) float64 {
	if l.N == 0 {
		return math.NaN()
	}
	return v
}

func ms(ns int64) float64 { return float64(ns) / float64(time.Millisecond) }

const mib = 1 << 20
