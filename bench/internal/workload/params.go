// Package workload drives the benchmark's workloads against a cluster of
// replica processes. It knows nothing of the system under test: every
// workload runs through the agent calls of package agent, the same for every
// system.
package workload

import "time"

// Params sizes the workloads.
type Params struct {
	TTL       time.Duration `json:"ttl_ns"`        // session TTL, the same for every system
	OpTimeout time.Duration `json:"op_timeout_ns"` // bounds each Lock and Unlock

	Warmup   time.Duration `json:"warmup_ns"`   // excluded from each steady workload's figures
	Duration time.Duration `json:"duration_ns"` // measured part of each steady workload

	DistinctWorkers  []int `json:"distinct_workers"`  // workload 2
	ContendedWorkers int   `json:"contended_workers"` // workload 3

	KeepaliveSessions int           `json:"keepalive_sessions"`  // workload 4
	KeepaliveLocks    int           `json:"keepalive_locks"`     // held by those sessions together
	KeepaliveSettle   time.Duration `json:"keepalive_settle_ns"` // after acquiring, before measuring
	KeepaliveWindow   time.Duration `json:"keepalive_window_ns"` // measured

	FailoverWorkers int           `json:"failover_workers"`   // workload 5
	FailoverBefore  time.Duration `json:"failover_before_ns"` // steady load before the kill
	FailoverAfter   time.Duration `json:"failover_after_ns"`  // load after the kill (bounds the figures)
	// FailoverProbe bounds each attempt of the probers, which measure how
	// soon a Lock called after the kill is granted.
	FailoverProbe time.Duration `json:"failover_probe_ns"`

	MemorySessions int `json:"memory_sessions"` // workload 6
	MemoryLocks    int `json:"memory_locks"`

	HoldConcurrency int `json:"hold_concurrency"` // concurrent acquisitions per replica process when filling locks

	ScaleSizes        []ScaleSize   `json:"scale_sizes"`          // workload 9, one fresh cluster per size
	ScaleWindow       time.Duration `json:"scale_window_ns"`      // keepalive CPU window
	ScaleProbe        time.Duration `json:"scale_probe_ns"`       // quiet prober window
	ScaleEtcdMaxLocks int           `json:"scale_etcd_max_locks"` // larger sizes run without etcd (its fill rate)
	// ScaleSnapshotRounds: quiet and during-a-snapshot probes, in turn, on
	// each filled cluster (medians reported; 0 counts as 1).
	ScaleSnapshotRounds int `json:"scale_snapshot_rounds"`

	StormSessions   int           `json:"storm_sessions"`       // workload 10: they expire together
	StormWaiters    int           `json:"storm_waiters"`        // sessions whose blocked Lock calls wait for their locks
	StormLive       int           `json:"storm_live"`           // further live sessions holding a lock each
	StormQueue      time.Duration `json:"storm_queue_ns"`       // from the waiters' calls to the kill
	StormAfter      time.Duration `json:"storm_after_ns"`       // bounds the grants after the TTL
	StormProbeAfter time.Duration `json:"storm_probe_after_ns"` // the prober runs TTL + this

	SemaphoreWorkers int `json:"semaphore_workers"` // workload 7
	SemaphoreLimit   int `json:"semaphore_limit"`
	RWReaders        int `json:"rw_readers"` // workload 8
	RWWriters        int `json:"rw_writers"`
}
