package workload

import (
	"context"
	"fmt"
	"time"

	"github.com/raftlock/raftlock/bench/internal/agent"
	"github.com/raftlock/raftlock/bench/internal/cluster"
	"github.com/raftlock/raftlock/bench/internal/mono"
	"github.com/raftlock/raftlock/bench/internal/stats"
)

// scaleRounds are the prober's figures of each round of snapshotRounds.
type scaleRounds struct {
	quietP99, snapP99, snapOps []float64
	notes                      []string
}

// snapshotRounds runs max(ScaleSnapshotRounds, 1) rounds, each a quiet
// probe on the follower then a probe overlapping a snapshot on the leader:
// alternating, so that drift of the machine shows in both.
func snapshotRounds(ctx context.Context, cl *cluster.Cluster, p Params, leader, follower int, took time.Duration) (scaleRounds, error) {
	var out scaleRounds
	for round := range max(p.ScaleSnapshotRounds, 1) {
		quiet, qerrs, err := probe(ctx, cl, p, follower, p.ScaleProbe, nil)
		if err != nil {
			return out, err
		}
		// The prober runs from 300 ms before the snapshot until 300 ms
		// after it should end (as long as the first took, or the probe).
		var snapFrom, snapTo int64
		var snap agent.SnapshotReply
		var snapErr error
		during, derrs, err := probe(ctx, cl, p, follower, max(took+600*time.Millisecond, p.ScaleProbe), func(startAt int64) {
			time.Sleep(mono.Until(startAt + int64(300*time.Millisecond)))
			snapFrom = mono.Now()
			snap, snapErr = cl.Nodes[leader].Agent.Snapshot(ctx, agent.SnapshotArgs{Timeout: 2 * time.Minute})
			snapTo = mono.Now()
		})
		if err != nil {
			return out, err
		}
		if snapErr != nil {
			return out, fmt.Errorf("snapshot of round %d: %w", round+1, snapErr)
		}
		qerrs.Merge(derrs)
		out.notes = append(out.notes, errorsNote(qerrs)...)
		overlapping := latencies(during, func(op agent.Op) bool { return op.UnlockEnd >= snapFrom && op.LockStart <= snapTo })
		q, o := stats.Summarize(latencies(quiet, nil)), stats.Summarize(overlapping)
		out.quietP99 = append(out.quietP99, nanIfEmpty(q, q.P99))
		out.snapP99 = append(out.snapP99, nanIfEmpty(o, o.P99))
		out.snapOps = append(out.snapOps, float64(o.N))
		out.notes = append(out.notes, fmt.Sprintf("round %d: prober p99 quiet %.1f ms (%d ops, max %.1f), during a snapshot of %.2f s %.1f ms (%d ops, max %.1f)",
			round+1, q.P99, q.N, q.Max, snap.Took.Seconds(), o.P99, o.N, o.Max))
	}
	return out, nil
}

// probe runs one Lock+Unlock worker on replica r's pool session 0 (a
// session of the fill, on a lock of its own) for d, with during (if set)
// running in the parent meanwhile; it returns the completed operations and
// the failed ones. The other replicas are profiled and traced over the
// same window (when asked: EnvCPUProfile, EnvTrace).
func probe(ctx context.Context, cl *cluster.Cluster, p Params, r int, d time.Duration, during func(startAt int64)) ([]agent.Op, agent.Errors, error) {
	startAt := mono.Now() + int64(100*time.Millisecond)
	stopAt := startAt + int64(d)
	done := make(chan struct{})
	if during != nil {
		go func() {
			defer close(done)
			during(startAt)
		}()
	} else {
		close(done)
	}
	callCtx, cancel := context.WithTimeout(ctx, d+p.OpTimeout+30*time.Second)
	defer cancel()
	for _, o := range cl.Live() {
		if o != r {
			cl.Nodes[o].Agent.Profile(ctx, agent.ProfileArgs{Label: "scale", StartAt: startAt, StopAt: stopAt})
		}
	}
	reply, err := cl.Nodes[r].Agent.Loop(callCtx, agent.LoopArgs{
		Workers: []agent.WorkerSpec{{Name: "scale-probe", Timeout: p.OpTimeout}},
		StartAt: startAt, StopAt: stopAt,
	})
	<-done
	if err != nil {
		return nil, agent.Errors{}, fmt.Errorf("probe on replica %d: %w", r, err)
	}
	return reply.Ops, reply.Errors, nil
}

// latencies returns Lock call → Unlock return of the operations keep
// accepts (nil: all).
func latencies(ops []agent.Op, keep func(agent.Op) bool) []int64 {
	var out []int64
	for _, op := range ops {
		if keep == nil || keep(op) {
			out = append(out, op.UnlockEnd-op.LockStart)
		}
	}
	return out
}
