package node_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/lockinfo"
	"github.com/raftlock/raftlock/internal/replica"
	"github.com/raftlock/raftlock/internal/testing/clustertest"
	"github.com/raftlock/raftlock/node"
)

// BenchmarkFloodShares measures, on a 3-node cluster in one process
// (loopback TCP, in-memory stores) with the default quotas, what one
// greedy client can take before the quotas refuse it, and whether another
// client still gets what it asks for afterwards:
//
//   - sessions/node: sessions a follower's client opens (64 callers, until
//     every caller is refused); other_node_opens is 1 when another
//     follower can still open a session afterwards;
//   - waiters/session: waits one session queues on one held lock (until
//     refused); other_session_queues is 1 when another session (on the
//     other follower) can still queue on that lock afterwards;
//     waiters/node: the waits of the greedy node's sessions on that lock
//     (further sessions queue until the node is refused);
//     other_node_queues is 1 when a new session of the other follower can
//     still queue afterwards;
//   - other_node_sessions_after: sessions the other follower opens after
//     the flood (until refused).
//
// Run it alone, once: go test -run '^$' -bench FloodShares -benchtime 1x ./node/
func BenchmarkFloodShares(b *testing.B) {
	for range b.N {
		c := clustertest.Start(b, clustertest.Options{Nodes: 3, Timing: node.LANTiming()})
		leader := c.WaitLeader(30 * time.Second)
		c.WaitReady(30 * time.Second)
		ctx := context.Background()
		for c.Nodes[leader].Status().ClusterVersion < fsm.MaxClusterVersion || c.Nodes[leader].Status().Limits == (fsm.Limits{}) {
			time.Sleep(10 * time.Millisecond)
		}
		greedy, other := c.Nodes[(leader+1)%3], c.Nodes[(leader+2)%3]

		open := func(n *node.Node, desc string) lockinfo.SessionID {
			r, err := replica.Of(n).Apply(ctx, fsm.OpenSession{TTL: time.Hour, Description: desc})
			if err != nil || r.Status != fsmwire.StatusOK {
				b.Fatalf("open a session on %s: %v %v", n.ID(), err, r.Err())
			}
			return r.Session
		}

		// Waiters: a session of the other node holds the lock, the greedy
		// client's one session queues on it until refused, then another
		// session of the other node asks to wait.
		holder, g, second := open(other, "holder"), open(greedy, "greedy waiter"), open(other, "second")
		if r, err := replica.Of(other).Apply(ctx, fsm.Acquire{Session: holder, Lock: "contended", Owner: newOwner()}); err != nil || r.Status != fsmwire.StatusGranted {
			b.Fatalf("hold: %v %+v", err, r)
		}
		queued := 0
		for {
			r, err := replica.Of(greedy).Apply(ctx, fsm.Acquire{Session: g, Lock: "contended", Owner: newOwner(), Wait: true})
			if err != nil || r.Status != fsmwire.StatusQueued {
				b.Logf("the greedy session's wait %d: %v %v", queued+1, err, r.Err())
				break
			}
			queued++
		}
		queues := func(s lockinfo.SessionID) float64 {
			w, err := replica.Of(other).Apply(ctx, fsm.Acquire{Session: s, Lock: "contended", Owner: newOwner(), Wait: true})
			b.Logf("another session's wait: %v %v", err, w.Err())
			if err == nil && w.Status == fsmwire.StatusQueued {
				return 1
			}
			return 0
		}
		b.Logf("one session queued %d waits", queued)
		b.ReportMetric(float64(queued), "waiters/session")
		b.ReportMetric(queues(second), "other_session_queues")
		// The greedy node's further sessions queue until refused.
		byNode := queued
		for refused := false; !refused; {
			s := open(greedy, "greedy waiter")
			for {
				r, err := replica.Of(greedy).Apply(ctx, fsm.Acquire{Session: s, Lock: "contended", Owner: newOwner(), Wait: true})
				if err != nil || r.Status != fsmwire.StatusQueued {
					refused = r.Quota != fsmwire.QuotaSessionWaiters
					b.Logf("the greedy node's wait %d: %v %v", byNode+1, err, r.Err())
					break
				}
				byNode++
			}
		}
		b.ReportMetric(float64(byNode), "waiters/node")
		b.ReportMetric(queues(open(other, "third")), "other_node_queues")

		// Sessions.
		var opened atomic.Int64
		var wg sync.WaitGroup
		start := time.Now()
		for range 64 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					r, err := replica.Of(greedy).Apply(ctx, fsm.OpenSession{TTL: time.Hour, Description: "greedy"})
					if err != nil || r.Status != fsmwire.StatusOK {
						return
					}
					opened.Add(1)
				}
			}()
		}
		wg.Wait()
		took := time.Since(start)
		r, err := replica.Of(other).Apply(ctx, fsm.OpenSession{TTL: time.Hour, Description: "other"})
		otherOpens := 0.0
		if err == nil && r.Status == fsmwire.StatusOK {
			otherOpens = 1
		}
		b.ReportMetric(float64(opened.Load()), "sessions/node")
		b.ReportMetric(otherOpens, "other_node_opens")
		more := 0
		for ; otherOpens == 1; more++ {
			if r, err := replica.Of(other).Apply(ctx, fsm.OpenSession{TTL: time.Hour, Description: "other"}); err != nil || r.Status != fsmwire.StatusOK {
				b.Logf("then the other follower opened %d more: %v %v", more, err, r.Err())
				break
			}
		}
		b.ReportMetric(float64(more), "other_node_sessions_after")
		b.Logf("a follower's client opened %d sessions in %v; then the other follower's open: %v %v", opened.Load(), took, err, r.Err())
		c.Close()
	}
}
