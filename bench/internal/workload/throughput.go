package workload

import (
	"context"
	"fmt"
	"math"

	"github.com/raftlock/raftlock/bench/internal/agent"
	"github.com/raftlock/raftlock/bench/internal/cluster"
	"github.com/raftlock/raftlock/bench/internal/report"
	"github.com/raftlock/raftlock/bench/internal/stats"
)

// Uncontended is workload 1: one worker, Lock+Unlock of its own lock, in a
// follower's process (as 2 of 3 application replicas are) or in the
// leader's. (etcd's client spreads requests over every endpoint whatever
// the process; raftlock's embedded node forwards to the leader from a
// follower.)
func Uncontended(ctx context.Context, cl *cluster.Cluster, p Params, onLeader bool) (Result, error) {
	leader, err := cl.Leader(ctx, defaultLeaderWait)
	if err != nil {
		return Result{}, err
	}
	replica := (leader + 1) % len(cl.Nodes)
	if onLeader {
		replica = leader
	}
	run, err := runLoop(ctx, cl, p, loopSpec{
		workers: []worker{{replica: replica, spec: agent.WorkerSpec{Name: "uncontended/0"}}},
		warmup:  p.Warmup, measure: p.Duration,
	})
	if err != nil {
		return Result{}, err
	}
	if err := failedReplicas(run); err != nil {
		return Result{}, err
	}
	res := throughputSamples(run, uncontendedDefs(onLeader))
	res.CDFs = cdf(map[bool]string{false: "1 worker, follower's process", true: "1 worker, leader's process"}[onLeader], lockUnlockLatencies(run))
	return res, nil
}

// Distinct is workload 2: n workers spread over every replica, each taking
// its own lock.
func Distinct(ctx context.Context, cl *cluster.Cluster, p Params, n int) (Result, error) {
	run, err := runLoop(ctx, cl, p, loopSpec{
		workers: spread(n, cl.Live(), func(w int) string { return fmt.Sprintf("distinct/%d", w) }),
		warmup:  p.Warmup, measure: p.Duration,
	})
	if err != nil {
		return Result{}, err
	}
	if err := failedReplicas(run); err != nil {
		return Result{}, err
	}
	res := throughputSamples(run, distinctDefs(n))
	res.CDFs = cdf(fmt.Sprintf("%d workers, distinct locks", n), lockUnlockLatencies(run))
	return res, nil
}

// throughputSamples reports the rate and latency of completed Lock+Unlock
// pairs (Lock called → Unlock returned).
func throughputSamples(run *loopRun, d lockUnlockDefs) Result {
	done := run.inWindow()
	lat := make([]int64, len(done))
	for i, op := range done {
		lat[i] = op.UnlockEnd - op.LockStart
	}
	l := stats.Summarize(lat)
	return Result{Samples: []report.Sample{
		{Def: d.ops, Value: float64(len(done)) / run.window().Seconds()},
		{Def: d.p50, Value: nanIfEmpty(l, l.P50)},
		{Def: d.p99, Value: nanIfEmpty(l, l.P99)},
		{Def: d.errs, Value: float64(run.errors.Count)},
		{Def: d.cpu, Value: cpuPerOp(run, len(done))},
	}, Notes: errorsNote(run.errors)}
}

// cpuPerOp is the CPU time of every replica process (node and workers) over
// the window per completed operation, in microseconds; NaN if unknown.
func cpuPerOp(run *loopRun, ops int) float64 {
	if run.cpu <= 0 || ops == 0 {
		return math.NaN()
	}
	return float64(run.cpu.Microseconds()) / float64(ops)
}

// lockUnlockLatencies returns Lock call → Unlock return of the window's
// operations.
func lockUnlockLatencies(run *loopRun) []int64 {
	done := run.inWindow()
	lat := make([]int64, len(done))
	for i, op := range done {
		lat[i] = op.UnlockEnd - op.LockStart
	}
	return lat
}

// failedReplicas turns a failed replica (in a workload that kills none)
// into an error.
func failedReplicas(run *loopRun) error {
	for r, err := range run.failed {
		return fmt.Errorf("replica %d: %w", r, err)
	}
	return nil
}

// errorsNote describes the errors of a run, if any.
func errorsNote(e agent.Errors) []string {
	if e.Count == 0 {
		return nil
	}
	return []string{fmt.Sprintf("%d failed operations, first: %q", e.Count, e.First)}
}
