package workload

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/raftlock/raftlock/bench/internal/agent"
	"github.com/raftlock/raftlock/bench/internal/cluster"
	"github.com/raftlock/raftlock/bench/internal/mono"
	"github.com/raftlock/raftlock/bench/internal/report"
	"github.com/raftlock/raftlock/bench/internal/stats"
)

// Storm is workload 10, an expiry storm, on a fresh cluster: StormSessions
// sessions in one follower's process hold a lock each; live sessions in the
// other two processes wait for every one of those locks (StormWaiters
// sessions in one, blocked Lock calls spread over them) or just hold a lock
// and keep their sessions alive (StormLive in the leader's), and a prober
// keeps doing Lock+Unlock. Then the storm's process is SIGKILLed: its
// sessions stop keeping alive and expire together after their TTL. It
// reports the time from the kill until every lock they held was granted to
// its waiter, and that time beyond the TTL (a session's deadline is its
// last keepalive + TTL, so every one has passed by kill + TTL: what is
// beyond is the cluster's work of turning expirations into grants and
// telling the waiters), the prober's p99 and failures, and how many live
// sessions were lost meanwhile (must be 0).
func Storm(ctx context.Context, cl *cluster.Cluster, p Params) (Result, error) {
	d := stormDefs(p)
	leader, err := cl.Leader(ctx, defaultLeaderWait)
	if err != nil {
		return Result{}, err
	}
	victim, waiter := (leader+1)%len(cl.Nodes), (leader+2)%len(cl.Nodes)
	open := func(r, n int) error {
		return cl.Nodes[r].Agent.OpenSessions(ctx, agent.OpenArgs{Count: n, TTL: p.TTL, Timeout: 3 * time.Minute})
	}
	if err := open(victim, p.StormSessions); err != nil {
		return Result{}, err
	}
	hold, err := cl.Nodes[victim].Agent.Hold(ctx, agent.HoldArgs{Prefix: "storm", PerSession: 1, Concurrency: p.HoldConcurrency, OpTimeout: p.OpTimeout})
	if err != nil {
		return Result{}, err
	}
	if hold.Held < p.StormSessions {
		return Result{}, fmt.Errorf("storm: only %d of %d locks held", hold.Held, p.StormSessions)
	}
	if err := open(waiter, p.StormWaiters); err != nil {
		return Result{}, err
	}
	if err := open(leader, p.StormLive); err != nil {
		return Result{}, err
	}
	defer closeSessions(ctx, cl)
	if _, err := cl.Nodes[leader].Agent.Hold(ctx, agent.HoldArgs{Prefix: "live", PerSession: 1, Concurrency: p.HoldConcurrency, OpTimeout: p.OpTimeout}); err != nil {
		return Result{}, err
	}
	names := make([]string, p.StormSessions)
	for j := range names { // agent.Hold's names: prefix/replica/session/k
		names[j] = fmt.Sprintf("storm/%d/%d/0", victim, j)
	}
	wait := p.TTL + p.StormAfter
	if err := cl.Nodes[waiter].Agent.StartAwait(ctx, agent.AwaitArgs{Names: names, Timeout: p.StormQueue + wait}); err != nil {
		return Result{}, err
	}
	if err := sleep(ctx, p.StormQueue); err != nil { // the waiters queue up
		return Result{}, err
	}
	var killAt int64
	ops, perrs, err := probe(ctx, cl, p, leader, p.TTL+p.StormProbeAfter, func(startAt int64) {
		time.Sleep(mono.Until(startAt + int64(time.Second)))
		killAt = mono.Now()
		cl.Nodes[victim].Kill()
	})
	if err != nil {
		return Result{}, err
	}
	got, err := cl.Nodes[waiter].Agent.AwaitResult(ctx, agent.AwaitArgs{Timeout: wait + 30*time.Second})
	if err != nil {
		return Result{}, err
	}
	var grants []int64
	for _, g := range got.Granted {
		if g > 0 {
			grants = append(grants, g)
		}
	}
	lost := 0
	for _, r := range []int{leader, waiter} {
		l, err := cl.Nodes[r].Agent.Lost(ctx)
		if err != nil {
			return Result{}, err
		}
		lost += l.Lost
	}
	res := Result{Notes: errorsNote(got.Errors)}
	if len(grants) < len(names) {
		res.Notes = append(res.Notes, fmt.Sprintf("only %d of %d storm locks granted to their waiters", len(grants), len(names)))
	}
	if lost > 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("%d live sessions lost during the storm", lost))
	}
	all := math.NaN()
	if len(grants) > 0 {
		all = ms(slices.Max(grants) - killAt)
	}
	l := stats.Summarize(latencies(ops, nil))
	res.Samples = []report.Sample{
		{Def: d.all, Value: all},
		{Def: d.beyond, Value: all - ms(int64(p.TTL))},
		{Def: d.lost, Value: float64(lost)},
		{Def: d.p99, Value: nanIfEmpty(l, l.P99)},
		{Def: d.probeErrs, Value: float64(perrs.Count)},
		{Def: d.granted, Value: float64(len(grants))},
	}
	return res, nil
}

type stormDefSet struct{ all, beyond, lost, p99, probeErrs, granted report.Def }

func stormDefs(p Params) stormDefSet {
	w := fmt.Sprintf("10. expiry storm: %s sessions (TTL %v) expire at once", report.FormatNumber(float64(p.StormSessions), 0), p.TTL)
	return stormDefSet{
		all:       def(w, "storm.all_granted_ms", "kill → every lock granted to its waiter (TTL included)", "ms", 0, false),
		beyond:    def(w, "storm.beyond_ttl_ms", "of which beyond the TTL", "ms", 0, false),
		lost:      def(w, "storm.live_sessions_lost", "live sessions lost (must be 0)", "", 0, false),
		p99:       def(w, "storm.prober_p99_ms", "prober Lock+Unlock p99 across the storm", "ms", 2, false),
		probeErrs: def(w, "storm.prober_errors", "prober failed operations", "", 0, false),
		granted:   hidden(w, "storm.granted", "storm locks granted to waiters"),
	}
}
