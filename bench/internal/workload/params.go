// Package workload drives the benchmark's workloads against a cluster of
// replica processes. It knows nothing of the system under test: every
// workload runs through the agent calls of package agent, the same for every
// system.
package workload

import "time"

// Params sizes the workloads.
type Params struct {
	TTL       time.Duration // session TTL, the same for every system
	OpTimeout time.Duration // bounds each Lock and Unlock

	Warmup   time.Duration // excluded from each steady workload's figures
	Duration time.Duration // measured part of each steady workload

	DistinctWorkers  []int // workload 2
	ContendedWorkers int   // workload 3

	KeepaliveSessions int           // workload 4
	KeepaliveLocks    int           // held by those sessions together
	KeepaliveSettle   time.Duration // after acquiring, before measuring
	KeepaliveWindow   time.Duration // measured

	FailoverWorkers int           // workload 5
	FailoverBefore  time.Duration // steady load before the kill
	FailoverAfter   time.Duration // load after the kill (bounds the figures)
	// FailoverProbe bounds each attempt of the probers, which measure how
	// soon a Lock called after the kill is granted.
	FailoverProbe time.Duration

	MemorySessions int // workload 6
	MemoryLocks    int

	HoldConcurrency int // concurrent acquisitions per replica process when filling locks
}
