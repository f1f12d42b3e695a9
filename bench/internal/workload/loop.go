package workload

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/raftlock/raftlock/bench/internal/agent"
	"github.com/raftlock/raftlock/bench/internal/cluster"
	"github.com/raftlock/raftlock/bench/internal/mono"
)

// worker is one Lock+Unlock loop: which replica process runs it and how.
type worker struct {
	replica int
	spec    agent.WorkerSpec // a zero Timeout means Params.OpTimeout
}

// loopRun is the outcome of runLoop.
type loopRun struct {
	ops      [][]agent.Op  // per worker, completed operations
	startAt  int64         // workers began (mono ns)
	from, to int64         // measurement window (mono ns): after the warm-up
	errors   agent.Errors  // operation errors, all replicas
	failed   map[int]error // replicas whose Loop call failed (killed ones)
	// cpu is the CPU time every replica process (its node and its workers)
	// used over the window, summed; 0 when it could not be read (a replica
	// died or was started in the window).
	cpu time.Duration
}

// window is the measured duration.
func (r *loopRun) window() time.Duration { return time.Duration(r.to - r.from) }

// inWindow returns every operation that completed in the window.
func (r *loopRun) inWindow() []agent.Op {
	var out []agent.Op
	for _, ops := range r.ops {
		for _, op := range ops {
			if op.UnlockEnd >= r.from && op.UnlockEnd <= r.to {
				out = append(out, op)
			}
		}
	}
	return out
}

// loopSpec is what runLoop runs.
type loopSpec struct {
	workers []worker
	warmup  time.Duration
	measure time.Duration
	// during, when set, runs in the parent while the workers run; it gets
	// the instant they start.
	during func(startAt int64)
}

// runLoop opens one session per worker in its replica process, runs every
// worker from a common start instant, and closes the sessions. A replica
// whose Loop call fails (it was killed) is reported in failed, not as an
// error.
func runLoop(ctx context.Context, cl *cluster.Cluster, p Params, spec loopSpec) (*loopRun, error) {
	byReplica := map[int][]int{} // replica → global worker indices
	for w, wk := range spec.workers {
		byReplica[wk.replica] = append(byReplica[wk.replica], w)
	}
	err := eachReplica(byReplica, func(r int, ws []int) error {
		return cl.Nodes[r].Agent.OpenSessions(ctx, agent.OpenArgs{Count: len(ws), TTL: p.TTL, Timeout: time.Minute})
	})
	if err != nil {
		return nil, err
	}
	run := &loopRun{ops: make([][]agent.Op, len(spec.workers)), failed: map[int]error{}}
	run.startAt = mono.Now() + int64(100*time.Millisecond)
	run.from = run.startAt + int64(spec.warmup)
	run.to = run.from + int64(spec.measure)
	callCtx, cancel := context.WithTimeout(ctx, mono.Until(run.to)+p.OpTimeout+30*time.Second)
	defer cancel()
	for _, r := range cl.Live() { // replicas without workers: profiled too (when asked)
		if _, ok := byReplica[r]; !ok {
			cl.Nodes[r].Agent.Profile(ctx, agent.ProfileArgs{Label: "serving", StartAt: run.from, StopAt: run.to})
		}
	}

	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	if spec.during != nil {
		wg.Go(func() { spec.during(run.startAt) })
	}
	wg.Go(func() { run.cpu = windowUsage(callCtx, cl, run.from, run.to) })
	eachReplica(byReplica, func(r int, ws []int) error {
		specs := make([]agent.WorkerSpec, len(ws))
		for k, w := range ws {
			specs[k] = spec.workers[w].spec
			if specs[k].Timeout == 0 {
				specs[k].Timeout = p.OpTimeout
			}
		}
		reply, err := cl.Nodes[r].Agent.Loop(callCtx, agent.LoopArgs{
			Workers: specs, StartAt: run.startAt, StopAt: run.to,
		})
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			run.failed[r] = err
			return nil
		}
		for _, op := range reply.Ops {
			w := ws[op.Worker]
			run.ops[w] = append(run.ops[w], op)
		}
		run.errors.Merge(reply.Errors)
		return nil
	})
	wg.Wait()
	eachReplica(byReplica, func(r int, _ []int) error {
		if cl.Nodes[r].Alive() {
			cl.Nodes[r].Agent.CloseSessions(ctx, agent.CloseArgs{Timeout: 30 * time.Second})
		}
		return nil
	})
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return run, nil
}

// windowUsage returns the CPU time the replica processes used from the
// mono instant from to the instant to, summed; 0 if the set of live
// processes changed or /proc could not be read.
func windowUsage(ctx context.Context, cl *cluster.Cluster, from, to int64) time.Duration {
	if sleep(ctx, mono.Until(from)) != nil {
		return 0
	}
	use0, err := cl.Usage()
	if err != nil {
		return 0
	}
	if sleep(ctx, mono.Until(to)) != nil {
		return 0
	}
	use1, err := cl.Usage()
	if err != nil {
		return 0
	}
	var sum time.Duration
	for i := range use0 {
		if (use0[i].CPU > 0) != (use1[i].CPU > 0) {
			return 0
		}
		sum += use1[i].CPU - use0[i].CPU
	}
	return sum
}

// eachReplica calls fn concurrently for every replica of m and joins errors.
func eachReplica(m map[int][]int, fn func(r int, ws []int) error) error {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for r, ws := range m {
		wg.Go(func() {
			if err := fn(r, ws); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("replica %d: %w", r, err))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		return errs[0]
	}
	return nil
}

// spread places n workers round-robin over the given replicas, worker w
// taking the lock name(w).
func spread(n int, replicas []int, name func(w int) string) []worker {
	out := make([]worker, n)
	for w := range out {
		out[w] = worker{replica: replicas[w%len(replicas)], spec: agent.WorkerSpec{Name: name(w)}}
	}
	return out
}

// split divides total into parts as evenly as possible.
func split(total, parts int) []int {
	out := make([]int, parts)
	for i := range out {
		out[i] = total / parts
		if i < total%parts {
			out[i]++
		}
	}
	return out
}
