package main

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/raftlock/raftlock/bench/internal/workload"
)

// Workload names for -workloads, in the order they run on a cluster.
// failover kills the leader, so it runs last; memory uses its own cluster.
var allWorkloads = []string{"uncontended", "distinct", "contended", "semaphore", "rwlock", "keepalive", "failover", "memory"}

// optionalWorkloads run only when -workloads names them: scale (cost at
// scale, one fresh cluster per size, up to a million locks) takes minutes
// and gigabytes; storm (10,000 sessions expire at once) a fresh cluster
// and a TTL plus a minute at most.
var optionalWorkloads = []string{"scale", "storm"}

// options is the whole configuration of a benchmark run.
type options struct {
	Quick         bool            `json:"quick"`
	Systems       []string        `json:"systems"`
	Workloads     []string        `json:"workloads"`
	Limits        bool            `json:"limits"`
	Hog           bool            `json:"hog"`            // a busy loop pinned to CPU 0 ran beside the benchmark
	Runs          int             `json:"runs"`           // rounds of the steady workloads and failover
	KeepaliveRuns int             `json:"keepalive_runs"` // the first rounds also run keepalive
	MemoryRuns    int             `json:"memory_runs"`    // rounds of the memory workload (own cluster)
	Params        workload.Params `json:"params"`

	FsyncIterations int           `json:"fsync_iterations"`
	RaftAppliers    []int         `json:"raft_appliers"`
	RaftDuration    time.Duration `json:"raft_duration_ns"`
	// BatchedWorkers and BatchedDepths: the ideal group commit's worker
	// counts and entries in flight (limits.BatchedRaft).
	BatchedWorkers []int `json:"batched_workers"`
	BatchedDepths  []int `json:"batched_depths"`
}

// defaults returns the full or the quick configuration. Full stays under
// 10 minutes for two systems, quick under 2.
func defaults(quick bool) options {
	o := options{
		Quick:     quick,
		Workloads: allWorkloads,
		Limits:    true,
		Runs:      3,
		// Every round: a window's CPU-seconds move by up to 3× with the
		// machine's phase (this VM reports no steal time), so the median
		// of two — their mean — let one noisy window set the figure.
		KeepaliveRuns: 3,
		MemoryRuns:    1,
		Params: workload.Params{
			TTL:               10 * time.Second,
			OpTimeout:         10 * time.Second,
			Warmup:            500 * time.Millisecond,
			Duration:          4 * time.Second,
			DistinctWorkers:   []int{16, 64},
			ContendedWorkers:  8,
			KeepaliveSessions: 100,
			KeepaliveLocks:    10_000,
			KeepaliveSettle:   2 * time.Second,
			KeepaliveWindow:   30 * time.Second,
			FailoverWorkers:   16,
			FailoverBefore:    time.Second,
			FailoverAfter:     12 * time.Second, // etcd's request timeout is 5 s + 2 × ElectionMs
			FailoverProbe:     200 * time.Millisecond,
			MemorySessions:    100,
			MemoryLocks:       100_000,
			HoldConcurrency:   64,
			SemaphoreWorkers:  16,
			SemaphoreLimit:    4,
			RWReaders:         16,
			RWWriters:         2,
			ScaleSizes:        []workload.ScaleSize{{Sessions: 100, Locks: 10_000}, {Sessions: 1_000, Locks: 100_000}, {Sessions: 10_000, Locks: 1_000_000}},
			ScaleWindow:       10 * time.Second,
			ScaleProbe:        3 * time.Second,
			ScaleEtcdMaxLocks: 100_000,
			StormSessions:     10_000,
			StormWaiters:      100,
			StormLive:         100,
			StormQueue:        5 * time.Second,
			StormAfter:        60 * time.Second,
			StormProbeAfter:   5 * time.Second,
		},
		FsyncIterations: 200,
		RaftAppliers:    []int{1, 16, 64},
		RaftDuration:    3 * time.Second,
		BatchedWorkers:  []int{16, 64},
		BatchedDepths:   []int{1, 2},
	}
	if quick {
		o.Runs, o.KeepaliveRuns = 1, 1
		o.Params.Warmup = 300 * time.Millisecond
		o.Params.Duration = 1500 * time.Millisecond
		o.Params.KeepaliveLocks = 5_000
		o.Params.KeepaliveWindow = 6 * time.Second
		o.Params.KeepaliveSettle = time.Second
		o.Params.FailoverAfter = 9 * time.Second
		o.Params.MemoryLocks = 20_000
		o.Params.ScaleSizes = o.Params.ScaleSizes[:2]
		o.Params.ScaleWindow = 5 * time.Second
		o.Params.StormSessions = 1_000
		o.RaftDuration = time.Second
	}
	return o
}

// parseList splits a comma-separated list and checks every item is allowed.
func parseList(s string, allowed []string) ([]string, error) {
	var out []string
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if !slices.Contains(allowed, f) {
			return nil, fmt.Errorf("unknown %q (choose from %s)", f, strings.Join(allowed, ","))
		}
		if !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out, nil
}

func (o *options) has(workload string) bool { return slices.Contains(o.Workloads, workload) }
