package node_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/devcerts"
	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/replica"
	"github.com/raftlock/raftlock/internal/testing/clustertest"
	"github.com/raftlock/raftlock/internal/testing/flood"
	"github.com/raftlock/raftlock/node"
)

// Strangers without a certificate cannot starve a cluster's elections of
// TLS handshakes (issue 46 #1): with every node's port flooded by
// connections that send one byte of a TLS handshake and stall, each
// dialed again as soon as the node closes it (after a second when the
// node refused it at once) — from 2 source addresses (64 connections per
// node from each, the review's attack) and from 16 (8 each) — a crashed
// leader is replaced within a few election timeouts, a follower's
// forwarded command goes through, and the crashed node, restarted, is
// ready again; twice. The nodes run on 127.0.0.1 (members), the strangers dial
// from 127.0.0.2 and up. Before the member reserve, either flood filled
// the 128 handshake slots.
func TestHandshakeFloodElection(t *testing.T) {
	if testing.Short() {
		t.Skip("real TCP, TLS and a connection flood: not in -short")
	}
	for _, tc := range []struct{ sources, perSource int }{{2, 64}, {16, 8}} {
		t.Run(fmt.Sprintf("sources=%d", tc.sources), func(t *testing.T) {
			ca, err := devcerts.NewCA("raftlock-test")
			if err != nil {
				t.Fatal(err)
			}
			timing := node.LANTiming()
			c := clustertest.Start(t, clustertest.Options{Nodes: 3, Durable: true, Timing: timing, Configure: func(i int, cfg *node.Config) {
				tc, err := ca.MutualTLS(clustertest.ID(i))
				if err != nil {
					t.Fatal(err)
				}
				cfg.TLS = tc
			}})
			c.WaitLeader(20 * time.Second)
			c.WaitReady(20 * time.Second)
			var targets []string
			for _, n := range c.Nodes {
				targets = append(targets, n.Addr())
			}
			f := flood.StartStall(targets, flood.Loopback(2, tc.sources), tc.perSource, time.Second)
			defer f.Stop()
			// Every slot dialed once, and the node's limits had time to act.
			c.Eventually(10*time.Second, func() (bool, string) {
				return f.Dials() >= int64(f.Slots()), fmt.Sprintf("%d of %d flood connections dialed", f.Dials(), f.Slots())
			})
			time.Sleep(500 * time.Millisecond)
			t.Logf("flood: %d of %d stalled connections open", f.Open(), f.Slots())

			// A new leader and a forwarded command each within a few
			// election timeouts (hashicorp/raft: one to two each, plus
			// pre-vote and vote round trips), with room for -race on a
			// shared machine (with the flood unbounded, a new leader took
			// tens of seconds or never came). The restarted node waits
			// besides for the leader's replication back-off, grown while
			// it was down.
			bound := 8 * timing.ElectionTimeout
			within := func(what string, bound time.Duration, done func() bool) {
				t.Helper()
				start := time.Now()
				for !done() {
					if time.Since(start) > bound {
						t.Fatalf("%s: not within %v (flood: %d of %d connections open, %d dials)", what, bound, f.Open(), f.Slots(), f.Dials())
					}
					time.Sleep(timing.HeartbeatTimeout / 10)
				}
				t.Logf("%s: %v", what, time.Since(start).Round(time.Millisecond))
			}

			for round := 1; round <= 2; round++ {
				crashed := c.WaitLeader(20 * time.Second)
				c.Crash(crashed)
				var leader *node.Node
				within(fmt.Sprintf("round %d: new leader after the leader's crash", round), bound, func() bool {
					for _, n := range c.Nodes {
						if n != nil && n.Status().State == "leader" {
							leader = n
						}
					}
					return leader != nil
				})
				var follower *node.Node
				for _, n := range c.Nodes {
					if n != nil && n != leader {
						follower = n
					}
				}
				ctx, cancel := context.WithTimeout(context.Background(), bound)
				within(fmt.Sprintf("round %d: command forwarded through %s", round, follower.ID()), bound, func() bool {
					r, err := replica.Of(follower).Apply(ctx, fsm.OpenSession{TTL: time.Minute})
					if err != nil || r.Status != fsmwire.StatusOK {
						t.Fatalf("round %d: forwarded command on %s under the flood: %v %+v", round, follower.ID(), err, r)
					}
					return true
				})
				cancel()
				c.Restart(crashed)
				restarted := c.Nodes[crashed]
				within(fmt.Sprintf("round %d: crashed leader restarted and ready", round), 4*bound, func() bool {
					select {
					case <-restarted.Ready():
						return true
					default:
						return false
					}
				})
			}
		})
	}
}
