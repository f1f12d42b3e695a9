package node_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/replica"
	"github.com/raftlock/raftlock/node"
)

// BenchmarkRenewalsAfterLeaderChange: what renewals in the log cost (cluster
// version 4). n sessions with a 10 s TTL renew every 3.3 s through the
// followers (their keepalives batched per follower, as lockapi's shared
// renewal grid makes them); the leader hands leadership to a follower.
// Reports the entries written in the renewal interval after the new leader
// took over (its barrier, the Renewed records, anything else) against the
// same interval before the change, and the keepalive latency (p50, p99,
// max) in the interval after the change and in the one before. One run per
// size, on memnet in real time with LAN timings.
func BenchmarkRenewalsAfterLeaderChange(b *testing.B) {
	for _, n := range []int{1_000, 10_000} {
		b.Run(fmt.Sprintf("sessions=%d", n), func(b *testing.B) {
			for range b.N {
				renewalsOnce(b, n)
			}
		})
	}
}

func renewalsOnce(b *testing.B, sessions int) {
	b.StopTimer()
	c := bigCluster(b)
	defer c.Close()
	c.WaitClusterVersion(fsm.MaxClusterVersion, 30*time.Second)
	li := c.WaitLeader(time.Second)
	var followers []*node.Node
	for i, n := range c.Nodes {
		if i != li {
			followers = append(followers, n)
		}
	}
	const ttl = 10 * time.Second
	const every = ttl / 3
	ids := applyMany(b, followers[0], sessions, func(int) fsm.Command { return fsm.OpenSession{TTL: ttl, Description: "renewing"} })

	type sample struct {
		at  time.Time
		lat time.Duration
		err error
	}
	var mu sync.Mutex
	var samples []sample
	stop := make(chan struct{})
	var wg sync.WaitGroup
	start := time.Now()
	for i, r := range ids {
		n := followers[i%2]
		wg.Go(func() {
			// On a grid shared by the sessions of a follower: 16 slots.
			slot := start.Add(time.Duration(i%16) * every / 16)
			for k := 1; ; k++ {
				select {
				case <-stop:
					return
				case <-time.After(time.Until(slot.Add(time.Duration(k) * every))):
				}
				ctx, cancel := context.WithTimeout(context.Background(), every)
				t0 := time.Now()
				err := replica.Of(n).KeepAlive(ctx, r.Session)
				cancel()
				mu.Lock()
				samples = append(samples, sample{t0, time.Since(t0), err})
				mu.Unlock()
			}
		})
	}
	time.Sleep(2 * every) // steady state
	l := c.Nodes[li]
	before0 := replica.Of(l).AppliedIndex()
	time.Sleep(every)
	steadyEntries := replica.Of(l).AppliedIndex() - before0

	b.StartTimer()
	changed := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	to, err := l.Operator().TransferLeadership(ctx, "")
	cancel()
	if err != nil {
		b.Fatal(err)
	}
	var nl *node.Node
	for nl == nil {
		for i, n := range c.Nodes {
			if c.ID(i) == to && node.IsLeading(n) {
				nl = n
			}
		}
		time.Sleep(time.Millisecond)
	}
	b.StopTimer()
	takeover := time.Now()
	after0 := replica.Of(nl).AppliedIndex()
	time.Sleep(every + time.Second)
	changeEntries := replica.Of(nl).AppliedIndex() - after0
	close(stop)
	wg.Wait()

	pct := func(from, to time.Time) (p50, p99, worst time.Duration, errs int) {
		var lats []time.Duration
		for _, s := range samples {
			if s.at.Before(from) || !s.at.Before(to) {
				continue
			}
			if s.err != nil {
				errs++
				continue
			}
			lats = append(lats, s.lat)
		}
		if len(lats) == 0 {
			return 0, 0, 0, errs
		}
		slices.Sort(lats)
		return lats[len(lats)/2], lats[len(lats)*99/100], lats[len(lats)-1], errs
	}
	s50, s99, smax, serrs := pct(changed.Add(-every), changed)
	a50, a99, amax, aerrs := pct(takeover, takeover.Add(every))
	b.ReportMetric(float64(changeEntries), "entries-after-change")
	b.ReportMetric(float64(steadyEntries), "entries-steady")
	b.ReportMetric(float64(takeover.Sub(changed).Milliseconds()), "takeover-ms")
	b.ReportMetric(float64(a50.Microseconds())/1000, "ka-p50-after-ms")
	b.ReportMetric(float64(a99.Microseconds())/1000, "ka-p99-after-ms")
	b.ReportMetric(float64(amax.Microseconds())/1000, "ka-max-after-ms")
	b.ReportMetric(float64(s50.Microseconds())/1000, "ka-p50-steady-ms")
	b.ReportMetric(float64(s99.Microseconds())/1000, "ka-p99-steady-ms")
	b.ReportMetric(float64(smax.Microseconds())/1000, "ka-max-steady-ms")
	b.ReportMetric(float64(aerrs+serrs), "ka-errors")
}
