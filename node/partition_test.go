package node_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/lockinfo"
	"github.com/raftlock/raftlock/internal/replica"
	"github.com/raftlock/raftlock/internal/testing/clustertest"
	"github.com/raftlock/raftlock/internal/testing/memnet"
	"github.com/raftlock/raftlock/node"
)

// On the minority side nothing is granted or renewed and callers get
// ErrNoQuorum when their context ends (not a hang); after healing the
// cluster converges.
func TestMinorityPartition(t *testing.T) {
	for _, tc := range []struct {
		name          string
		isolateLeader bool
	}{{"leader isolated", true}, {"follower isolated", false}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c, leader := startMemCluster(t)
				ctx := context.Background()
				minority := c.Follower(leader)
				if tc.isolateLeader {
					minority = leader
				}
				m := c.Nodes[minority]
				s := openSession(t, ctx, m, 10*time.Second)
				before := m.Stats()

				c.Isolate(minority)
				start := time.Now()
				actx, cancel := context.WithTimeout(ctx, 2*time.Second)
				r, err := replica.Of(m).Apply(actx, fsm.Acquire{Session: s, Lock: "l", Owner: newOwner()})
				cancel()
				if !errors.Is(err, node.ErrNoQuorum) || !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("apply on the minority: %v %+v", err, r)
				}
				if took := time.Since(start); took > 2*time.Second+100*time.Millisecond {
					t.Fatalf("apply returned %v after its context ended", took-2*time.Second)
				}
				kctx, cancel := context.WithTimeout(ctx, time.Second)
				err = replica.Of(m).KeepAlive(kctx, s)
				cancel()
				if !errors.Is(err, node.ErrNoQuorum) {
					t.Fatalf("keepalive on the minority: %v", err)
				}
				if _, ok := m.Holder("l"); ok {
					t.Fatal("the minority shows a grant")
				}

				// The majority elects (or keeps) a leader and commits.
				var maj []int
				for i := range c.Nodes {
					if i != minority {
						maj = append(maj, i)
					}
				}
				mctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				defer cancel()
				s2 := openSession(t, mctx, c.Nodes[maj[0]], time.Minute)
				if r, err := replica.Of(c.Nodes[maj[1]]).Apply(mctx, fsm.Acquire{Session: s2, Lock: "l", Owner: newOwner()}); err != nil || r.Status != fsmwire.StatusGranted {
					t.Fatalf("majority acquire: %v %+v", err, r)
				}
				// Only entries committed before the cut may
				// still be applied there: no state changes.
				if after := m.Stats(); after.LastToken != before.LastToken || after.Sessions != before.Sessions || after.Held != before.Held {
					t.Fatalf("the minority's state changed while cut off: %+v → %+v", before, after)
				}

				c.Heal()
				if err := m.Sync(mctx); err != nil {
					t.Fatalf("sync after heal: %v", err)
				}
				if _, ok := m.Holder("l"); !ok {
					t.Fatal("healed node does not show the majority's grant")
				}
				requireConverged(t, mctx, c.Nodes[maj[0]], m)
			})
		})
	}
}

// Restart of the whole cluster from disk: state intact, and the next token
// is higher than every token before.
func TestRestartWholeClusterFromDisk(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := clustertest.Start(t, clustertest.Options{Nodes: 3, Net: memnet.New(), Durable: true, Configure: func(i int, cfg *node.Config) {
			cfg.SnapshotThreshold = 8 // snapshots and log replay both happen
			cfg.TrailingLogs = 4
			cfg.SnapshotInterval = 100 * time.Millisecond
		}})
		c.WaitLeader(10 * time.Second)
		c.WaitReady(10 * time.Second)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		s := openSession(t, ctx, c.Nodes[0], time.Hour)
		var last lockinfo.Token
		holder := newOwner()
		for i := range 30 {
			o := newOwner()
			if i == 29 {
				o = holder
			}
			r, err := replica.Of(c.Nodes[i%3]).Apply(ctx, fsm.Acquire{Session: s, Lock: "l", Owner: o})
			if err != nil || r.Status != fsmwire.StatusGranted {
				t.Fatalf("acquire %d: %v %+v", i, err, r)
			}
			last = r.Token
			if i < 29 {
				if _, err := replica.Of(c.Nodes[i%3]).Apply(ctx, fsm.Release{Lock: "l", Owner: o}); err != nil {
					t.Fatal(err)
				}
			}
		}
		time.Sleep(time.Second) // let snapshots happen
		for i := range c.Nodes {
			c.Stop(i)
		}
		for i := range c.Nodes {
			c.Restart(i)
		}
		c.WaitLeader(10 * time.Second)
		c.WaitReady(10 * time.Second)
		for _, n := range c.Nodes {
			h, ok := n.Holder("l")
			if !ok || h.Owner != holder || h.Token != last {
				t.Fatalf("%s after restart: holder %+v %v, want %s token %d", n.ID(), h, ok, holder, last)
			}
			if _, ok := n.Session(s); !ok {
				t.Fatalf("%s lost the session", n.ID())
			}
		}
		if _, err := replica.Of(c.Nodes[0]).Apply(ctx, fsm.Release{Lock: "l", Owner: holder}); err != nil {
			t.Fatal(err)
		}
		r, err := replica.Of(c.Nodes[1]).Apply(ctx, fsm.Acquire{Session: s, Lock: "other", Owner: newOwner()})
		if err != nil || r.Token <= last {
			t.Fatalf("token after restart %d, last before %d (%v)", r.Token, last, err)
		}
	})
}

// requireConverged syncs the nodes until they reach the same applied index
// (no writes are in flight) and requires identical state there.
func requireConverged(t *testing.T, ctx context.Context, nodes ...*node.Node) {
	t.Helper()
	for range 20 {
		for _, n := range nodes {
			if err := n.Sync(ctx); err != nil {
				t.Fatal(err)
			}
		}
		i0, d0 := replica.ServerOf(nodes[0]).Digest()
		same := true
		for _, n := range nodes[1:] {
			i, d := replica.ServerOf(n).Digest()
			if i != i0 {
				same = false
				break
			}
			if d != d0 {
				t.Fatalf("%s and %s disagree at index %d", nodes[0].ID(), n.ID(), i)
			}
		}
		if same {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("replicas did not reach the same applied index")
}
