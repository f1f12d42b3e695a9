package workload

import (
	"context"
	"fmt"
	"slices"

	"github.com/raftlock/raftlock/bench/internal/agent"
	"github.com/raftlock/raftlock/bench/internal/cluster"
	"github.com/raftlock/raftlock/bench/internal/report"
	"github.com/raftlock/raftlock/bench/internal/stats"
)

// Semaphore is workload 7: SemaphoreWorkers workers spread over every
// replica loop Acquire(1 permit)+Release on one semaphore of
// SemaphoreLimit permits. It reports acquisitions per second, the cycle
// latency (Acquire called → Release returned) and, as a check, the most
// grants valid at once (Acquire returned → Release called), which must
// not exceed the limit. etcd has no counting semaphore.
func Semaphore(ctx context.Context, cl *cluster.Cluster, p Params) (Result, error) {
	ws := spread(p.SemaphoreWorkers, cl.Live(), func(int) string { return "semaphore" })
	for i := range ws {
		ws[i].spec.Mode, ws[i].spec.Limit, ws[i].spec.Permits = agent.ModeSemaphore, p.SemaphoreLimit, 1
	}
	run, err := steady(ctx, cl, p, ws)
	if err != nil {
		return Result{}, err
	}
	done := run.inWindow()
	l := cycle(done)
	d := semaphoreDefs(p)
	peak := peakHeld(run.ops)
	res := Result{Samples: []report.Sample{
		{Def: d.rate, Value: float64(len(done)) / run.window().Seconds()},
		{Def: d.p50, Value: nanIfEmpty(l, l.P50)},
		{Def: d.p99, Value: nanIfEmpty(l, l.P99)},
		{Def: d.peak, Value: float64(peak)},
		{Def: d.errs, Value: float64(run.errors.Count)},
	}, Notes: errorsNote(run.errors)}
	if peak > p.SemaphoreLimit {
		res.Notes = append(res.Notes, fmt.Sprintf("SEMAPHORE: %d grants valid at once, limit %d", peak, p.SemaphoreLimit))
	}
	return res, nil
}

// RWLock is workload 8: RWReaders readers and RWWriters writers spread
// over every replica loop on one read-write lock (RLock+RUnlock,
// Lock+Unlock). It reports reads and writes per second and their cycle
// latencies, and counts grants that overlapped a writer's (must be 0).
// etcd: its experimental recipes.RWMutex.
func RWLock(ctx context.Context, cl *cluster.Cluster, p Params) (Result, error) {
	n := p.RWReaders + p.RWWriters
	ws := spread(n, cl.Live(), func(int) string { return "rwlock" })
	for i := range ws { // the first workers (on different replicas) write
		ws[i].spec.Mode = agent.ModeRead
		if i < p.RWWriters {
			ws[i].spec.Mode = agent.ModeWrite
		}
	}
	run, err := steady(ctx, cl, p, ws)
	if err != nil {
		return Result{}, err
	}
	var reads, writes []agent.Op
	for w, ops := range run.ops {
		for _, op := range ops {
			if op.UnlockEnd < run.from || op.UnlockEnd > run.to {
				continue
			}
			if ws[w].spec.Mode == agent.ModeWrite {
				writes = append(writes, op)
			} else {
				reads = append(reads, op)
			}
		}
	}
	rl, wl := cycle(reads), cycle(writes)
	overlaps := writerOverlaps(run.ops, ws)
	d := rwDefs(p)
	res := Result{Samples: []report.Sample{
		{Def: d.reads, Value: float64(len(reads)) / run.window().Seconds()},
		{Def: d.writes, Value: float64(len(writes)) / run.window().Seconds()},
		{Def: d.readP99, Value: nanIfEmpty(rl, rl.P99)},
		{Def: d.writeP50, Value: nanIfEmpty(wl, wl.P50)},
		{Def: d.writeP99, Value: nanIfEmpty(wl, wl.P99)},
		{Def: d.overlaps, Value: float64(overlaps)},
		{Def: d.errs, Value: float64(run.errors.Count)},
	}, Notes: errorsNote(run.errors)}
	if overlaps > 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("RW EXCLUSION: %d grants overlapped a writer's", overlaps))
	}
	return res, nil
}

// steady runs the workers over the warm-up and the measured window; a
// replica failing is an error (these workloads kill none).
func steady(ctx context.Context, cl *cluster.Cluster, p Params, ws []worker) (*loopRun, error) {
	run, err := runLoop(ctx, cl, p, loopSpec{workers: ws, warmup: p.Warmup, measure: p.Duration})
	if err != nil {
		return nil, err
	}
	return run, failedReplicas(run)
}

// cycle summarizes Lock called → Unlock returned.
func cycle(ops []agent.Op) stats.Latency {
	lat := make([]int64, len(ops))
	for i, op := range ops {
		lat[i] = op.UnlockEnd - op.LockStart
	}
	return stats.Summarize(lat)
}

// interval is a grant's validity: Lock returned → Unlock called.
type interval struct {
	from, to int64
	writer   bool
}

func intervals(ops [][]agent.Op, writer func(w int) bool) []interval {
	var out []interval
	for w, list := range ops {
		for _, op := range list {
			out = append(out, interval{op.Granted, op.UnlockStart, writer(w)})
		}
	}
	slices.SortFunc(out, func(a, b interval) int { return cmpInt64(a.from, b.from) })
	return out
}

// peakHeld is the most grants valid at once.
func peakHeld(ops [][]agent.Op) int {
	type edge struct {
		at    int64
		delta int
	}
	var edges []edge
	for _, iv := range intervals(ops, func(int) bool { return false }) {
		edges = append(edges, edge{iv.from, 1}, edge{iv.to, -1})
	}
	slices.SortFunc(edges, func(a, b edge) int {
		if c := cmpInt64(a.at, b.at); c != 0 {
			return c
		}
		return a.delta - b.delta // ends first
	})
	cur, peak := 0, 0
	for _, e := range edges {
		cur += e.delta
		peak = max(peak, cur)
	}
	return peak
}

// writerOverlaps counts grants whose validity overlapped a writer's.
func writerOverlaps(ops [][]agent.Op, ws []worker) int {
	ivs := intervals(ops, func(w int) bool { return ws[w].spec.Mode == agent.ModeWrite })
	n := 0
	for i, a := range ivs {
		for _, b := range ivs[i+1:] {
			if b.from >= a.to {
				break
			}
			if a.writer || b.writer {
				n++
			}
		}
	}
	return n
}

type semaphoreDefSet struct{ rate, p50, p99, peak, errs report.Def }

func semaphoreDefs(p Params) semaphoreDefSet {
	w := fmt.Sprintf("7. %d workers, one semaphore of %d permits", p.SemaphoreWorkers, p.SemaphoreLimit)
	return semaphoreDefSet{
		rate: def(w, "semaphore.acquires_per_s", "Acquire+Release/s", "", 0, true),
		p50:  def(w, "semaphore.p50_ms", "Acquire+Release p50", "ms", 2, false),
		p99:  def(w, "semaphore.p99_ms", "Acquire+Release p99", "ms", 2, false),
		peak: hidden(w, "semaphore.peak_held", "most grants valid at once (at most the limit)"),
		errs: hidden(w, "semaphore.errors", "failed operations"),
	}
}

type rwDefSet struct{ reads, writes, readP99, writeP50, writeP99, overlaps, errs report.Def }

func rwDefs(p Params) rwDefSet {
	w := fmt.Sprintf("8. %d readers + %d writers, one read-write lock", p.RWReaders, p.RWWriters)
	return rwDefSet{
		reads:    def(w, "rwlock.reads_per_s", "RLock+RUnlock/s", "", 0, true),
		writes:   def(w, "rwlock.writes_per_s", "Lock+Unlock/s (writers)", "", 0, true),
		readP99:  def(w, "rwlock.read_p99_ms", "read p99", "ms", 2, false),
		writeP50: def(w, "rwlock.write_p50_ms", "write p50", "ms", 2, false),
		writeP99: def(w, "rwlock.write_p99_ms", "write p99", "ms", 2, false),
		overlaps: hidden(w, "rwlock.overlaps", "grants overlapping a writer's (must be 0)"),
		errs:     hidden(w, "rwlock.errors", "failed operations"),
	}
}
