package workload

import "github.com/raftlock/raftlock/bench/internal/report"

// Result is one run of one workload on one system.
type Result struct {
	Samples []report.Sample
	Notes   []string // diagnostics worth reporting: errors seen, anomalies
}
