package workload

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/raftlock/raftlock/bench/internal/agent"
	"github.com/raftlock/raftlock/bench/internal/cluster"
	"github.com/raftlock/raftlock/bench/internal/mono"
	"github.com/raftlock/raftlock/bench/internal/report"
)

// Keepalive is workload 4: sessions spread over every replica hold locks
// for a window without doing anything else; it reports the log entries the
// cluster wrote per second and the CPU seconds each replica process spent
// over the window (keepalives, heartbeats, timers — everything), and how
// often their threads slept and woke (voluntary context switches: a count
// that, unlike CPU time, does not move with the machine's speed).
func Keepalive(ctx context.Context, cl *cluster.Cluster, p Params) (Result, error) {
	held, errs, rate, err := fill(ctx, cl, p, "held", p.KeepaliveSessions, p.KeepaliveLocks)
	if err != nil {
		return Result{}, err
	}
	defer closeSessions(ctx, cl)
	if err := sleep(ctx, p.KeepaliveSettle); err != nil {
		return Result{}, err
	}
	idx0, err := logIndex(ctx, cl)
	if err != nil {
		return Result{}, err
	}
	use0, err := cl.Usage()
	if err != nil {
		return Result{}, err
	}
	t0 := time.Now()
	now := mono.Now()
	for _, r := range cl.Live() {
		cl.Nodes[r].Agent.Profile(ctx, agent.ProfileArgs{Label: "keepalive", StartAt: now, StopAt: now + int64(p.KeepaliveWindow)})
	}
	if err := sleep(ctx, p.KeepaliveWindow); err != nil {
		return Result{}, err
	}
	use1, err := cl.Usage()
	if err != nil {
		return Result{}, err
	}
	window := time.Since(t0)
	idx1, err := logIndex(ctx, cl)
	if err != nil {
		return Result{}, err
	}
	var sum, maxCPU, sleeps float64
	for i := range use0 {
		cpu := (use1[i].CPU - use0[i].CPU).Seconds()
		sum += cpu
		maxCPU = max(maxCPU, cpu)
		sleeps += float64(use1[i].Sleeps - use0[i].Sleeps)
	}
	d := keepaliveDefs(p)
	res := Result{Samples: []report.Sample{
		{Def: d.entries, Value: float64(idx1-idx0) / window.Seconds()},
		{Def: d.cpuMean, Value: sum / float64(len(use0))},
		{Def: d.cpuMax, Value: maxCPU},
		{Def: d.sleeps, Value: sleeps / float64(len(use0)) / window.Seconds()},
		{Def: d.acquire, Value: rate},
		{Def: d.held, Value: float64(held)},
		{Def: d.window, Value: window.Seconds()},
		{Def: d.errs, Value: float64(errs.Count)},
	}, Notes: errorsNote(errs)}
	if held < p.KeepaliveLocks {
		res.Notes = append(res.Notes, fmt.Sprintf("only %d of %d locks held", held, p.KeepaliveLocks))
	}
	return res, nil
}

// fill opens sessions spread over every replica and makes them acquire
// locks in total, and returns how many are held and the acquisition rate.
func fill(ctx context.Context, cl *cluster.Cluster, p Params, prefix string, sessions, locks int) (held int, errs agent.Errors, rate float64, err error) {
	live := cl.Live()
	perReplica := split(sessions, len(live))
	perSession := locks / sessions
	m := map[int][]int{}
	for i, r := range live {
		m[r] = make([]int, perReplica[i])
	}
	err = eachReplica(m, func(r int, s []int) error {
		return cl.Nodes[r].Agent.OpenSessions(ctx, agent.OpenArgs{Count: len(s), TTL: p.TTL, Timeout: 2 * time.Minute})
	})
	if err != nil {
		return 0, errs, 0, err
	}
	start := time.Now()
	var (
		mu      sync.Mutex
		replies = map[int]agent.HoldReply{}
	)
	err = eachReplica(m, func(r int, _ []int) error {
		reply, err := cl.Nodes[r].Agent.Hold(ctx, agent.HoldArgs{
			Prefix: prefix, PerSession: perSession, Concurrency: p.HoldConcurrency, OpTimeout: p.OpTimeout,
		})
		mu.Lock()
		replies[r] = reply
		mu.Unlock()
		return err
	})
	elapsed := time.Since(start)
	for _, r := range replies {
		held += r.Held
		errs.Merge(r.Errors)
	}
	if err != nil {
		closeSessions(ctx, cl)
		return held, errs, 0, err
	}
	return held, errs, float64(held) / elapsed.Seconds(), nil
}

// closeSessions closes every live replica's session pool.
func closeSessions(ctx context.Context, cl *cluster.Cluster) {
	m := map[int][]int{}
	for _, r := range cl.Live() {
		m[r] = nil
	}
	eachReplica(m, func(r int, _ []int) error {
		return cl.Nodes[r].Agent.CloseSessions(ctx, agent.CloseArgs{Timeout: time.Minute})
	})
}

// logIndex returns the highest log index any live replica knows committed.
func logIndex(ctx context.Context, cl *cluster.Cluster) (uint64, error) {
	var idx uint64
	for _, r := range cl.Live() {
		st, err := cl.Nodes[r].Agent.Status(ctx)
		if err != nil {
			return 0, err
		}
		idx = max(idx, st.LogIndex)
	}
	return idx, nil
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
