package workload

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/raftlock/raftlock/bench/internal/agent"
	"github.com/raftlock/raftlock/bench/internal/cluster"
	"github.com/raftlock/raftlock/bench/internal/report"
	"github.com/raftlock/raftlock/bench/internal/stats"
)

// Contended is workload 3: n workers spread over every replica loop on one
// lock. It reports handoffs per second and the latency from a holder's
// Unlock call to the next holder's grant (timestamps of different processes,
// on the machine's CLOCK_MONOTONIC).
func Contended(ctx context.Context, cl *cluster.Cluster, p Params) (Result, error) {
	idx0, err := logIndex(ctx, cl)
	if err != nil {
		return Result{}, err
	}
	run, err := runLoop(ctx, cl, p, loopSpec{
		workers: spread(p.ContendedWorkers, cl.Live(), func(int) string { return "contended" }),
		warmup:  p.Warmup, measure: p.Duration,
	})
	if err != nil {
		return Result{}, err
	}
	if err := failedReplicas(run); err != nil {
		return Result{}, err
	}
	idx1, err := logIndex(ctx, cl)
	if err != nil {
		return Result{}, err
	}
	var grants []agent.Op
	all := 0 // grants of the whole run, warm-up included: the log's span
	for _, ops := range run.ops {
		all += len(ops) // every one completed (agent.LoopReply)
		for _, op := range ops {
			if op.Granted >= run.from && op.Granted <= run.to {
				grants = append(grants, op)
			}
		}
	}
	gaps, overlaps := Handoffs(grants)
	l := stats.Summarize(gaps)
	d := contendedDefs(p)
	res := Result{Samples: []report.Sample{
		{Def: d.rate, Value: float64(len(grants)) / run.window().Seconds()},
		{Def: d.p50, Value: nanIfEmpty(l, l.P50)},
		{Def: d.p99, Value: nanIfEmpty(l, l.P99)},
		{Def: d.overlaps, Value: float64(overlaps)},
		{Def: d.errs, Value: float64(run.errors.Count)},
		{Def: d.cpu, Value: cpuPerOp(run, len(grants))},
		{Def: d.entries, Value: perGrant(idx1-idx0, all)},
	}, Notes: errorsNote(run.errors), CDFs: cdf(fmt.Sprintf("%d workers, one lock: Unlock → next grant", p.ContendedWorkers), gaps)}
	if overlaps > 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("MUTUAL EXCLUSION: %d grants came before the previous holder called Unlock", overlaps))
	}
	return res, nil
}

// Handoffs orders the grants of one lock and returns, for each grant after
// the first, the time from the previous holder's Unlock call to this grant.
// A grant before the previous holder's Unlock call would break mutual
// exclusion: those are counted, not measured.
func Handoffs(grants []agent.Op) (gaps []int64, overlaps int) {
	grants = slices.Clone(grants)
	slices.SortFunc(grants, func(a, b agent.Op) int { return cmpInt64(a.Granted, b.Granted) })
	for i := 1; i < len(grants); i++ {
		gap := grants[i].Granted - grants[i-1].UnlockStart
		if gap < 0 {
			overlaps++
			continue
		}
		gaps = append(gaps, gap)
	}
	return gaps, overlaps
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// perGrant is entries per grant (NaN without grants): how many log entries
// the cluster wrote for each hand-off — an entry that carries an Unlock and
// the next Locks together makes it 1, one per command 2 or more.
func perGrant(entries uint64, grants int) float64 {
	if grants == 0 {
		return math.NaN()
	}
	return float64(entries) / float64(grants)
}
