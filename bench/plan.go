package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/raftlock/raftlock/bench/internal/cluster"
	"github.com/raftlock/raftlock/bench/internal/floorsys"
	"github.com/raftlock/raftlock/bench/internal/raftlocksys"
	"github.com/raftlock/raftlock/bench/internal/report"
	"github.com/raftlock/raftlock/bench/internal/workload"
)

// replicas is the cluster size of every system.
const replicas = 3

// bench runs the selected workloads and collects their results.
type bench struct {
	opts     options
	dir      string // work directory: data dirs of every cluster
	metrics  report.Collector
	problems []string
	cdfs     map[string][]report.CDF // per system, every run's latency distributions
}

// step is one workload run on a running cluster.
type step struct {
	name string
	run  func(ctx context.Context, cl *cluster.Cluster) (workload.Result, error)
	only []string // the lock services that have what it needs (nil: every one)
	// floors: the floor systems (floorsys) run it too. They have plain
	// locks with a FIFO line and no sessions: only workloads that need
	// nothing else (no semaphores, read-write locks, expiry or failover;
	// the keepalive window measures them idle, with nothing to renew).
	floors bool
}

// runs reports whether the step runs on sys.
func (s step) runs(sys string) bool {
	if floorsys.IsFloor(sys) {
		return s.floors
	}
	return s.only == nil || slices.Contains(s.only, sys)
}

// roundSteps are the workloads that share one cluster in round r, in order.
func (b *bench) roundSteps(r int) []step {
	p := b.opts.Params
	var steps []step
	if b.opts.has("uncontended") {
		for _, onLeader := range []bool{false, true} {
			name := map[bool]string{false: "uncontended (follower)", true: "uncontended (leader)"}[onLeader]
			steps = append(steps, step{name, func(ctx context.Context, cl *cluster.Cluster) (workload.Result, error) {
				return workload.Uncontended(ctx, cl, p, onLeader)
			}, nil, true})
		}
	}
	if b.opts.has("distinct") {
		for _, n := range p.DistinctWorkers {
			steps = append(steps, step{fmt.Sprintf("distinct(%d)", n), func(ctx context.Context, cl *cluster.Cluster) (workload.Result, error) {
				return workload.Distinct(ctx, cl, p, n)
			}, nil, true})
		}
	}
	if b.opts.has("contended") {
		steps = append(steps, step{"contended", func(ctx context.Context, cl *cluster.Cluster) (workload.Result, error) {
			return workload.Contended(ctx, cl, p)
		}, nil, true})
	}
	if b.opts.has("semaphore") { // etcd has no counting semaphore
		steps = append(steps, step{"semaphore", func(ctx context.Context, cl *cluster.Cluster) (workload.Result, error) {
			return workload.Semaphore(ctx, cl, p)
		}, raftlocksys.All, false})
	}
	if b.opts.has("rwlock") { // etcd: client/v3/experimental/recipes RWMutex
		steps = append(steps, step{"rwlock", func(ctx context.Context, cl *cluster.Cluster) (workload.Result, error) {
			return workload.RWLock(ctx, cl, p)
		}, nil, false})
	}
	if b.opts.has("keepalive") && r < b.opts.KeepaliveRuns {
		steps = append(steps, step{"keepalive", func(ctx context.Context, cl *cluster.Cluster) (workload.Result, error) {
			return workload.Keepalive(ctx, cl, p)
		}, nil, true})
	}
	if b.opts.has("failover") {
		steps = append(steps, step{"failover", func(ctx context.Context, cl *cluster.Cluster) (workload.Result, error) {
			return workload.Failover(ctx, cl, p)
		}, nil, false})
	}
	return steps
}

// run runs every round. Systems alternate: each round starts a fresh
// cluster of each system in turn (one cluster alive at a time), and the
// order of the systems flips every round so that drift of the machine
// favours neither.
func (b *bench) run(ctx context.Context) {
	floorSteps := slices.ContainsFunc(b.roundSteps(0), func(s step) bool { return s.floors })
	for _, sys := range b.opts.Systems {
		if floorsys.IsFloor(sys) && !floorSteps {
			b.problem("%s: not run (it runs only the uncontended, distinct, contended and keepalive workloads, and none is selected)", sys)
		}
	}
	for r := range b.opts.Runs {
		steps := b.roundSteps(r)
		if len(steps) == 0 {
			break
		}
		for _, sys := range order(b.opts.Systems, r) {
			b.onCluster(ctx, sys, fmt.Sprintf("run %d/%d", r+1, b.opts.Runs), steps)
		}
	}
	if b.opts.has("scale") {
		b.runScale(ctx)
	}
	if b.opts.has("storm") {
		p := b.opts.Params
		st := []step{{"storm", func(ctx context.Context, cl *cluster.Cluster) (workload.Result, error) {
			return workload.Storm(ctx, cl, p)
		}, nil, false}}
		for _, sys := range b.opts.Systems {
			b.onCluster(ctx, sys, "storm", st)
		}
	}
	if b.opts.has("memory") {
		p := b.opts.Params
		mem := []step{{"memory", func(ctx context.Context, cl *cluster.Cluster) (workload.Result, error) {
			return workload.Memory(ctx, cl, p)
		}, nil, false}}
		for r := range b.opts.MemoryRuns {
			for _, sys := range order(b.opts.Systems, r) {
				b.onCluster(ctx, sys, fmt.Sprintf("memory run %d/%d", r+1, b.opts.MemoryRuns), mem)
			}
		}
	}
}

// order returns the systems, reversed on odd rounds.
func order(systems []string, round int) []string {
	s := slices.Clone(systems)
	if round%2 == 1 {
		slices.Reverse(s)
	}
	return s
}

// onCluster starts a fresh cluster of sys, runs the steps on it and stops it.
func (b *bench) onCluster(ctx context.Context, sys, label string, steps []step) {
	if ctx.Err() != nil || !slices.ContainsFunc(steps, func(s step) bool { return s.runs(sys) }) {
		return // nothing here runs on sys (a floor, for most workloads): start no cluster
	}
	logf("[%s %s] starting a %d-replica cluster", sys, label, replicas)
	cl, err := cluster.Start(ctx, sys, replicas, b.dir)
	if err != nil {
		b.problem("%s %s: start: %v", sys, label, err)
		return
	}
	defer cl.Kill()
	for _, s := range steps {
		if ctx.Err() != nil {
			return
		}
		if !s.runs(sys) {
			continue
		}
		res, err := s.run(ctx, cl)
		for _, c := range cl.Crashed() {
			b.problem("%s %s %s: %s", sys, label, s.name, c)
		}
		if err != nil {
			b.problem("%s %s %s: %v", sys, label, s.name, err)
			continue
		}
		b.metrics.Add(sys, res.Samples)
		if len(res.CDFs) > 0 {
			if b.cdfs == nil {
				b.cdfs = map[string][]report.CDF{}
			}
			b.cdfs[sys] = append(b.cdfs[sys], res.CDFs...)
		}
		logf("[%s %s] %s: %s", sys, label, s.name, summary(res.Samples))
		for _, n := range res.Notes {
			b.problem("%s %s %s: %s", sys, label, s.name, n)
		}
	}
}

func (b *bench) problem(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	b.problems = append(b.problems, msg)
	logf("  ! %s", msg)
}

// summary renders samples on one line for progress output.
func summary(samples []report.Sample) string {
	var parts []string
	for _, s := range samples {
		if s.Def.Hidden && s.Value == 0 {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s=%s", s.Def.Name, report.FormatNumber(s.Value, max(s.Def.Digits, 1))))
	}
	return strings.Join(parts, ", ")
}

// logf writes progress to stderr (stdout carries the table).
func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
}

// runScale runs workload 9: one fresh cluster per size and system, sizes in
// increasing order; etcd only up to ScaleEtcdMaxLocks (it fills ~4k locks/s).
func (b *bench) runScale(ctx context.Context) {
	p := b.opts.Params
	for r, size := range p.ScaleSizes {
		st := []step{{fmt.Sprintf("scale(%d sessions, %d locks)", size.Sessions, size.Locks), func(ctx context.Context, cl *cluster.Cluster) (workload.Result, error) {
			return workload.Scale(ctx, cl, p, size)
		}, nil, false}}
		for _, sys := range order(b.opts.Systems, r) {
			if sys == "etcd" && size.Locks > p.ScaleEtcdMaxLocks {
				b.problem("etcd scale(%d locks): not run (above -scale-etcd-max-locks %d)", size.Locks, p.ScaleEtcdMaxLocks)
				continue
			}
			b.onCluster(ctx, sys, "scale", st)
		}
	}
}
