package workload

import (
	"context"
	"fmt"
	"math"

	"github.com/raftlock/raftlock/bench/internal/agent"
	"github.com/raftlock/raftlock/bench/internal/cluster"
	"github.com/raftlock/raftlock/bench/internal/mono"
	"github.com/raftlock/raftlock/bench/internal/report"
)

// Failover is workload 5: FailoverWorkers workers spread over every replica
// loop on their own locks, and one prober per replica loops on fresh locks
// with short attempts (FailoverProbe each, then a new attempt on a new lock).
// After FailoverBefore the leader's process gets SIGKILL. It reports:
//
//   - kill → next grant of a free lock: the first grant, on a surviving
//     replica, to a Lock called after the kill (probers and workers alike);
//   - kill → every surviving worker granted again: when the last surviving
//     worker got a grant to a Lock called after the kill — what an
//     application with the default operation timeout sees, including calls
//     that were in flight at the kill and had to time out first.
//
// The cluster is left with one replica dead: run this last on a cluster.
func Failover(ctx context.Context, cl *cluster.Cluster, p Params) (Result, error) {
	live := cl.Live()
	workers := spread(p.FailoverWorkers, live, func(w int) string { return fmt.Sprintf("failover/%d", w) })
	for _, r := range live {
		workers = append(workers, worker{replica: r, spec: agent.WorkerSpec{
			Name: fmt.Sprintf("probe/%d", r), Fresh: true, Timeout: p.FailoverProbe,
		}})
	}
	var (
		killed  = -1
		killAt  int64
		killErr error
	)
	run, err := runLoop(ctx, cl, p, loopSpec{
		workers: workers,
		measure: p.FailoverBefore + p.FailoverAfter,
		during: func(startAt int64) {
			mono.Sleep(startAt + int64(p.FailoverBefore))
			leader, err := cl.Leader(ctx, defaultLeaderWait)
			if err != nil {
				killErr = err
				return
			}
			killed, killAt = leader, mono.Now()
			cl.Nodes[leader].Kill()
		},
	})
	if err != nil {
		return Result{}, err
	}
	if killErr != nil {
		return Result{}, killErr
	}
	for r, err := range run.failed {
		if r != killed {
			return Result{}, fmt.Errorf("surviving replica %d: %w", r, err)
		}
	}
	first, all := math.Inf(1), 0.0
	survivors, resumed := 0, 0
	for w, ops := range run.ops {
		if workers[w].replica == killed {
			continue
		}
		probe := w >= p.FailoverWorkers
		if !probe {
			survivors++
		}
		for _, op := range ops {
			if op.LockStart < killAt {
				continue
			}
			d := ms(op.Granted - killAt)
			first = min(first, d)
			if !probe {
				all = max(all, d)
				resumed++
			}
			break
		}
	}
	res := Result{Notes: errorsNote(run.errors)}
	if math.IsInf(first, 1) {
		first = math.NaN()
		res.Notes = append(res.Notes, fmt.Sprintf("no grant within %v of the kill", p.FailoverAfter))
	}
	if resumed < survivors {
		all = math.NaN()
		res.Notes = append(res.Notes, fmt.Sprintf("%d of %d surviving workers had no grant within %v of the kill",
			survivors-resumed, survivors, p.FailoverAfter))
	}
	d := failoverDefs(p)
	res.Samples = []report.Sample{
		{Def: d.first, Value: first},
		{Def: d.all, Value: all},
		{Def: d.errs, Value: float64(run.errors.Count)},
	}
	return res, nil
}
