package node_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/replica"
	"github.com/raftlock/raftlock/internal/testing/clustertest"
	"github.com/raftlock/raftlock/internal/testing/memnet"
	"github.com/raftlock/raftlock/node"
)

// Benchmarks of the leader's session expiry at scale (issue 20 #2, #3), on a
// 3-node cluster over memnet (real time) with in-memory storage and LAN
// timings; quotas off (they would refuse these sizes). Bounded: one run per
// size.

// applyMany applies cmd(i) for i in [0, n) from 256 goroutines and returns
// the results.
func applyMany(b *testing.B, n *node.Node, count int, cmd func(i int) fsm.Command) []fsm.Result {
	b.Helper()
	out := make([]fsm.Result, count)
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 1)
	for range 256 {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= count {
					return
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				r, _, err := replica.Of(n).Propose(ctx, cmd(i))
				cancel()
				if err != nil {
					select {
					case errs <- err:
					default:
					}
					return
				}
				out[i] = r
			}
		})
	}
	wg.Wait()
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
	return out
}

func bigCluster(b *testing.B) *clustertest.Cluster {
	c := clustertest.Start(b, clustertest.Options{Nodes: 3, Net: memnet.New(), Timing: node.LANTiming(), Configure: func(i int, cfg *node.Config) {
		noQuotas(cfg)
	}})
	c.WaitLeader(30 * time.Second)
	c.WaitReady(30 * time.Second)
	return c
}

// BenchmarkFailoverWithLongQueue: n sessions wait on one lock (each with one
// waiter); 100 unrelated sessions with a 1 s TTL renew every 333 ms through
// the followers; the leader is cut off (as by a crash: its heartbeats stop
// at once). Reports the new leader's takeover (from the cut until its lease
// manager leads) and how many of the 100 live sessions the failover lost
// (expired although renewed).
func BenchmarkFailoverWithLongQueue(b *testing.B) {
	for _, n := range []int{5_000, 20_000, 50_000, 200_000} {
		b.Run(fmt.Sprintf("waiters=%d", n), func(b *testing.B) {
			for range b.N {
				failoverOnce(b, n)
			}
		})
	}
}

func failoverOnce(b *testing.B, waiters int) {
	b.StopTimer()
	c := bigCluster(b)
	defer c.Close()
	li := c.WaitLeader(time.Second)
	leader := c.Nodes[li]
	holder := applyMany(b, leader, 1, func(int) fsm.Command { return fsm.OpenSession{TTL: time.Hour} })[0].Session
	applyMany(b, leader, 1, func(int) fsm.Command { return fsm.Acquire{Session: holder, Lock: "hot", Owner: newOwner()} })
	sess := applyMany(b, leader, waiters, func(int) fsm.Command { return fsm.OpenSession{TTL: time.Hour, Description: "waiter"} })
	applyMany(b, leader, waiters, func(i int) fsm.Command {
		return fsm.Acquire{Session: sess[i].Session, Lock: "hot", Owner: newOwner(), Wait: true}
	})

	const ttl = time.Second
	li = c.WaitLeader(30 * time.Second) // it may have moved while the queue was built
	var followers []*node.Node
	for i, n := range c.Nodes {
		if i != li {
			followers = append(followers, n)
		}
	}
	live := applyMany(b, followers[0], 100, func(int) fsm.Command { return fsm.OpenSession{TTL: ttl, Description: "live"} })
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i, r := range live {
		n := followers[i%2]
		wg.Go(func() {
			t := time.NewTicker(ttl / 3)
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case <-t.C:
				}
				ctx, cancel := context.WithTimeout(context.Background(), ttl/3)
				replica.Of(n).KeepAlive(ctx, r.Session)
				cancel()
			}
		})
	}
	time.Sleep(3 * ttl) // renewed a few times
	if now := c.WaitLeader(time.Second); now != li {
		b.Fatalf("leadership moved from %d to %d during the setup", li, now)
	}

	b.StartTimer()
	start := time.Now()
	c.Isolate(li)
	var took time.Duration
	for took == 0 {
		for _, n := range followers {
			if node.IsLeading(n) {
				took = time.Since(start)
			}
		}
		time.Sleep(time.Millisecond)
	}
	b.StopTimer()
	time.Sleep(3 * ttl)
	close(stop)
	wg.Wait()
	lost := 0
	for _, r := range live {
		if _, ok := followers[0].Session(r.Session); !ok {
			lost++
		}
	}
	b.ReportMetric(float64(took.Milliseconds()), "takeover-ms")
	b.ReportMetric(float64(lost), "lost-of-100")
}

// BenchmarkOpenCloseWithSessions: open+close of a session (two proposals)
// on the leader, 16 callers, with 0 or 100,000 other live sessions.
func BenchmarkOpenCloseWithSessions(b *testing.B) {
	for _, others := range []int{0, 100_000} {
		b.Run(fmt.Sprintf("sessions=%d", others), func(b *testing.B) {
			c := bigCluster(b)
			defer c.Close()
			leader := c.Nodes[c.WaitLeader(time.Second)]
			if others > 0 {
				applyMany(b, leader, others, func(int) fsm.Command { return fsm.OpenSession{TTL: time.Hour} })
			}
			b.SetParallelism(max(1, 16/runtime.GOMAXPROCS(0)))
			b.ResetTimer()
			start := time.Now()
			var ops atomic.Int64
			b.RunParallel(func(pb *testing.PB) {
				ctx := context.Background()
				for pb.Next() {
					r, _, err := replica.Of(leader).Propose(ctx, fsm.OpenSession{TTL: time.Minute})
					if err != nil {
						b.Error(err)
						return
					}
					if _, _, err := replica.Of(leader).Propose(ctx, fsm.CloseSession{Session: r.Session}); err != nil {
						b.Error(err)
						return
					}
					ops.Add(1)
				}
			})
			b.ReportMetric(float64(ops.Load())/time.Since(start).Seconds(), "open+close/s")
		})
	}
}
