package workload

import (
	"context"
	"fmt"
	"time"

	"github.com/raftlock/raftlock/bench/internal/agent"
	"github.com/raftlock/raftlock/bench/internal/cluster"
	"github.com/raftlock/raftlock/bench/internal/report"
	"github.com/raftlock/raftlock/bench/internal/stats"
)

// ScaleSize is one point of the cost-growth table: Sessions spread over
// every replica hold Locks locks together.
type ScaleSize struct {
	Sessions int `json:"sessions"`
	Locks    int `json:"locks"`
}

// Scale is workload 9, cost at scale, on a fresh cluster per size: the
// sessions take the locks and keep them; then, in order, the RSS of every
// replica process (after a GC, as in workload 6), the CPU seconds of each
// over a keepalive window (nothing but keepalives), a prober's Lock+Unlock
// p99 in a follower's process on the quiet cluster, a snapshot on the
// leader (time and size), the prober's p99 while a second snapshot is
// taken (the operations that overlap it) — both ScaleSnapshotRounds times
// in turn, the medians reported — and the time a follower killed with
// SIGKILL takes to serve again from its data directory.
func Scale(ctx context.Context, cl *cluster.Cluster, p Params, size ScaleSize) (Result, error) {
	d := scaleDefs(size)
	idle, _, err := memory(ctx, cl)
	if err != nil {
		return Result{}, err
	}
	held, errs, rate, err := fill(ctx, cl, p, "scale", size.Sessions, size.Locks)
	if err != nil {
		return Result{}, err
	}
	defer closeSessions(ctx, cl)
	res := Result{Notes: errorsNote(errs)}
	if held < size.Locks {
		res.Notes = append(res.Notes, fmt.Sprintf("only %d of %d locks held", held, size.Locks))
	}
	if err := sleep(ctx, p.KeepaliveSettle); err != nil {
		return Result{}, err
	}
	rss, _, err := memory(ctx, cl)
	if err != nil {
		return Result{}, err
	}
	cpu, err := windowCPU(ctx, cl, p.ScaleWindow)
	if err != nil {
		return Result{}, err
	}
	leader, err := cl.Leader(ctx, defaultLeaderWait)
	if err != nil {
		return Result{}, err
	}
	follower := (leader + 1) % len(cl.Nodes)
	snap, err := cl.Nodes[leader].Agent.Snapshot(ctx, agent.SnapshotArgs{Timeout: 2 * time.Minute})
	if err != nil {
		return Result{}, fmt.Errorf("snapshot: %w", err)
	}
	rounds, err := snapshotRounds(ctx, cl, p, leader, follower, snap.Took)
	if err != nil {
		return Result{}, err
	}
	res.Notes = append(res.Notes, rounds.notes...)
	restart, err := cl.Restart(ctx, follower)
	if err != nil {
		return Result{}, err
	}
	res.Samples = []report.Sample{
		{Def: d.rss, Value: mean(rss) / mib},
		{Def: d.rssGrowth, Value: (mean(rss) - mean(idle)) / mib},
		{Def: d.cpu, Value: mean(cpu)},
		{Def: d.snapS, Value: snap.Took.Seconds()},
		{Def: d.snapMiB, Value: float64(snap.Bytes) / mib},
		{Def: d.restartS, Value: restart.Seconds()},
		{Def: d.quietP99, Value: stats.Median(rounds.quietP99)},
		{Def: d.snapP99, Value: stats.Median(rounds.snapP99)},
		{Def: d.snapOps, Value: stats.Median(rounds.snapOps)},
		{Def: d.acquire, Value: rate},
		{Def: d.held, Value: float64(held)},
	}
	return res, nil
}

// windowCPU returns each live replica process's CPU seconds over a window
// of nothing but what the cluster does by itself.
func windowCPU(ctx context.Context, cl *cluster.Cluster, window time.Duration) ([]float64, error) {
	use0, err := cl.Usage()
	if err != nil {
		return nil, err
	}
	if err := sleep(ctx, window); err != nil {
		return nil, err
	}
	use1, err := cl.Usage()
	if err != nil {
		return nil, err
	}
	var out []float64
	for i := range use0 {
		if use0[i].CPU > 0 {
			out = append(out, (use1[i].CPU - use0[i].CPU).Seconds())
		}
	}
	return out, nil
}

type scaleDefSet struct {
	rss, rssGrowth, cpu, snapS, snapMiB, restartS, quietP99, snapP99, snapOps, acquire, held report.Def
}

// ScaleKey is the key prefix of a size's metrics ("scale.1000k.").
func ScaleKey(size ScaleSize) string { return fmt.Sprintf("scale.%dk.", size.Locks/1000) }

func scaleDefs(size ScaleSize) scaleDefSet {
	w := fmt.Sprintf("9. scale: %s sessions hold %s locks", report.FormatNumber(float64(size.Sessions), 0),
		report.FormatNumber(float64(size.Locks), 0))
	k := ScaleKey(size)
	return scaleDefSet{
		rss:       def(w, k+"rss_mib_mean", "RSS per node, mean", "MiB", 1, false),
		rssGrowth: def(w, k+"rss_growth_mib_mean", "RSS growth per node over idle, mean", "MiB", 1, false),
		cpu:       def(w, k+"cpu_s_per_node", "CPU-seconds per node over the keepalive window, mean", "s", 2, false),
		snapS:     def(w, k+"snapshot_s", "snapshot on the leader: time", "s", 2, false),
		snapMiB:   def(w, k+"snapshot_mib", "snapshot size", "MiB", 1, false),
		restartS:  def(w, k+"restart_s", "follower SIGKILLed: start → serving again", "s", 2, false),
		quietP99:  def(w, k+"quiet_p99_ms", "prober Lock+Unlock p99, quiet", "ms", 2, false),
		snapP99:   def(w, k+"snapshot_p99_ms", "prober Lock+Unlock p99 during a snapshot", "ms", 2, false),
		snapOps:   hidden(w, k+"snapshot_ops", "prober operations overlapping the snapshot"),
		acquire:   def(w, k+"acquire_locks_per_s", "filling: locks acquired/s", "", 0, true),
		held:      hidden(w, k+"held", "locks held"),
	}
}
