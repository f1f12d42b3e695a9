package node_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/lockinfo"
	"github.com/raftlock/raftlock/internal/nodeopts"
	"github.com/raftlock/raftlock/internal/replica"
	"github.com/raftlock/raftlock/internal/testing/clustertest"
	"github.com/raftlock/raftlock/internal/testing/memnet"
	"github.com/raftlock/raftlock/node"
)

// fairCluster is a ready 3-node cluster whose every node has lim (once in
// force); it returns the cluster and its leader.
func fairCluster(t *testing.T, lim fsm.Limits) (*clustertest.Cluster, int) {
	t.Helper()
	c, li := readyCluster(t, clustertest.Options{Configure: func(i int, cfg *node.Config) { cfg.Limits = lim }})
	c.WaitLimits(lim, 10*time.Second)
	return c, li
}

// applyUntilRefused applies cmd (made afresh for each call) from 16 callers on n until
// every caller is refused; it returns how many succeeded and one refusal.
func applyUntilRefused(t *testing.T, n *node.Node, cmd func() fsm.Command) (int, fsm.Result) {
	t.Helper()
	var ok atomic.Int64
	var mu sync.Mutex
	var refused fsm.Result
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for {
				r, err := replica.Of(n).Apply(context.Background(), cmd())
				if err != nil {
					t.Errorf("%s: %v", n.ID(), err)
					return
				}
				if r.Status == fsmwire.StatusQuota {
					mu.Lock()
					refused = r
					mu.Unlock()
					return
				}
				ok.Add(1)
			}
		})
	}
	wg.Wait()
	return int(ok.Load()), refused
}

// wantShareRefusal checks that r is a refusal by q, a fair share.
func wantShareRefusal(t *testing.T, what string, r fsm.Result, q fsmwire.Quota) {
	t.Helper()
	if err := r.Err(); r.Status != fsmwire.StatusQuota || r.Quota != q || !errors.Is(err, fsmwire.ErrQuota) || !errors.Is(err, fsmwire.ErrFairShare) {
		t.Fatalf("%s: %+v (%v), want a refusal by the share %s", what, r, err, q)
	}
}

// Issue 46 #4: one node's client opened every session the cluster allows,
// and every other node's NewSession failed. Now a node alone takes three
// quarters of MaxSessions; every other node still gets its share; a
// client cannot charge its sessions to another node; and the reserve keeps
// a few sessions for the node's own tools.
func TestNodeShareOfSessions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim := fsm.DefaultLimits()
		lim.MaxSessions, lim.NodeShares = 64, 2 // a share of 8, 16 held back
		c, li := fairCluster(t, lim)
		greedy, other, leader := c.Nodes[c.Follower(li)], c.Nodes[3-li-c.Follower(li)], c.Nodes[li]
		ctx := context.Background()

		opened, refused := applyUntilRefused(t, greedy, func() fsm.Command {
			return fsm.OpenSession{TTL: time.Hour, Description: "greedy", Node: other.ID()} // claims another node
		})
		if opened != 48 {
			t.Fatalf("a follower's client opened %d sessions, want three quarters of 64", opened)
		}
		wantShareRefusal(t, "the greedy node", refused, fsmwire.QuotaNodeSessions)
		t.Log(refused.Err())
		sessions, _ := leader.Sessions(0, 0) // one page holds them all
		for _, si := range sessions {
			if si.Node != greedy.ID() {
				t.Fatalf("session %d of the greedy client belongs to %q, not %q", si.ID, si.Node, greedy.ID())
			}
		}
		for _, n := range []*node.Node{other, leader} {
			for i := range 8 {
				r, err := replica.Of(n).Apply(ctx, fsm.OpenSession{TTL: time.Hour, Description: "other"})
				if err != nil || r.Status != fsmwire.StatusOK {
					t.Fatalf("%s's session %d after the flood: %v %v", n.ID(), i+1, err, r.Err())
				}
				if si, _ := leader.Session(r.Session); si.Node != n.ID() {
					t.Fatalf("%s's session belongs to %q", n.ID(), si.Node)
				}
			}
		}
		r, _ := replica.Of(other).Apply(ctx, fsm.OpenSession{TTL: time.Hour})
		if r.Status != fsmwire.StatusQuota || r.Quota != fsmwire.QuotaSessions || errors.Is(r.Err(), fsmwire.ErrFairShare) {
			t.Fatalf("the 65th session: %+v", r)
		}
		// The reserve: the greedy node's own housekeeping session still opens.
		r, err := replica.Of(greedy).Apply(ctx, fsm.OpenSession{TTL: time.Hour, Description: "admin", Reserved: true})
		if si, _ := leader.Session(r.Session); err != nil || r.Status != fsmwire.StatusOK || !si.Reserved {
			t.Fatalf("a reserved session on the greedy node: %v %+v %+v", err, r, si)
		}
		if got := node.QuotaRefusals(leader, fsmwire.QuotaNodeSessions); got < 1 {
			t.Fatalf("refusals by the node's share: %v", got)
		}
	})
}

// Issue 46 #4: one client with two sessions filled a lock's queue and
// others got quota errors. Now one session has at most its share of a
// queue, another session still queues; and one node's sessions take at
// most three quarters of a queue, while the other node's still queue.
func TestSessionAndNodeShareOfAQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim := fsm.DefaultLimits()
		lim.MaxWaitersPerLock, lim.NodeShares, lim.MaxSessionWaitersPerLock = 64, 2, 12 // a node's share 8, 16 held back
		c, li := fairCluster(t, lim)
		greedy, other, leader := c.Nodes[c.Follower(li)], c.Nodes[3-li-c.Follower(li)], c.Nodes[li]
		ctx := context.Background()
		holder := openSession(t, ctx, leader, time.Hour)
		mustApply(t, leader, fsm.Acquire{Session: holder, Lock: "contended", Owner: newOwner()}, fsmwire.StatusGranted)
		wait := func(s lockinfo.SessionID) func() fsm.Command {
			return func() fsm.Command { return fsm.Acquire{Session: s, Lock: "contended", Owner: newOwner(), Wait: true} }
		}

		first := openSession(t, ctx, greedy, time.Hour)
		queued, refused := applyUntilRefused(t, greedy, wait(first))
		if queued != 12 {
			t.Fatalf("one session queued %d waits, want its share 12", queued)
		}
		wantShareRefusal(t, "the greedy session", refused, fsmwire.QuotaSessionWaiters)
		t.Log(refused.Err())
		second := openSession(t, ctx, greedy, time.Hour)
		mustApply(t, greedy, wait(second)(), fsmwire.StatusQueued) // another session still queues

		total := 13
		for total < 48 {
			s := openSession(t, ctx, greedy, time.Hour)
			n, r := applyUntilRefused(t, greedy, wait(s))
			if total += n; r.Quota == fsmwire.QuotaNodeWaiters {
				break
			}
		}
		if total != 48 {
			t.Fatalf("the greedy node queued %d waits, want three quarters of 64", total)
		}
		r := mustApply(t, greedy, wait(openSession(t, ctx, greedy, time.Hour))(), fsmwire.StatusQuota)
		wantShareRefusal(t, "the greedy node", r, fsmwire.QuotaNodeWaiters)
		t.Log(r.Err())
		for range 2 {
			s := openSession(t, ctx, other, time.Hour)
			for range 4 {
				mustApply(t, other, wait(s)(), fsmwire.StatusQueued) // the other node's share: 8
			}
		}
		if li, _ := leader.Lock("contended"); len(li.Waiters) != 56 {
			t.Fatalf("%d waiters", len(li.Waiters))
		}
	})
}

// Issue 46 #4: nothing bounded the cluster's locks (or bytes: see fsm's
// TestClusterBoundsOfLocksAndBytes). Now MaxLocks does, and one node takes
// at most three quarters of it while another still gets its share.
func TestNodeShareOfLocks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim := fsm.DefaultLimits()
		lim.MaxLocks, lim.NodeShares = 64, 2
		c, li := fairCluster(t, lim)
		greedy, other := c.Nodes[c.Follower(li)], c.Nodes[3-li-c.Follower(li)]
		ctx := context.Background()
		gs := openSession(t, ctx, greedy, time.Hour)
		var n atomic.Int64
		locked, refused := applyUntilRefused(t, greedy, func() fsm.Command {
			return fsm.Acquire{Session: gs, Lock: fmt.Sprint("greedy-", n.Add(1)), Owner: newOwner()}
		})
		if locked != 48 {
			t.Fatalf("one node took %d locks, want three quarters of 64", locked)
		}
		wantShareRefusal(t, "the greedy node's locks", refused, fsmwire.QuotaNodeLocks)
		os := openSession(t, ctx, other, time.Hour)
		for i := range 8 {
			mustApply(t, other, fsm.Acquire{Session: os, Lock: fmt.Sprint("other-", i), Owner: newOwner()}, fsmwire.StatusGranted)
		}
		r := mustApply(t, other, fsm.Acquire{Session: os, Lock: "other-8", Owner: newOwner()}, fsmwire.StatusQuota)
		wantShareRefusal(t, "the other node beyond its share", r, fsmwire.QuotaNodeLocks)

	})
}

// The fair shares ride on cluster version 4: while one server supports
// only 3 the leader proposes the quotas without them (and drops them
// from any SetLimits), sessions carry no node and the reserve is off;
// once it is upgraded they are in force and sessions carry their node.
func TestFairSharesWaitForClusterVersion4(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var oldMax atomic.Uint64
		oldMax.Store(3)
		c := clustertest.Start(t, clustertest.Options{Nodes: 3, Net: memnet.New(), Configure: func(i int, cfg *node.Config) {
			if i == 2 {
				nodeopts.Hooks(cfg).MaxClusterVersion = oldMax.Load
			}
		}})
		c.WaitLeader(10 * time.Second)
		c.WaitReady(10 * time.Second)
		waitClusterVersion(t, c, 3)
		time.Sleep(5 * time.Second) // several version checks
		li := c.WaitLeader(time.Second)
		leader, follower := c.Nodes[li], c.Nodes[c.Follower(li)]
		old := fsm.Downgrade(fsm.SetLimits{Limits: fsm.DefaultLimits()}, 3).(fsm.SetLimits).Limits
		if old == fsm.DefaultLimits() || old.NodeShares != 0 {
			t.Fatalf("downgraded limits %+v", old)
		}
		c.Eventually(10*time.Second, func() (bool, string) { return leader.Status().Limits == old, "quotas not proposed at version 3" })
		ctx := context.Background()
		r := mustApply(t, follower, fsm.OpenSession{TTL: time.Hour, Node: "x", Reserved: true}, fsmwire.StatusOK)
		if si, _ := leader.Session(r.Session); si.Node != "" || si.Reserved {
			t.Fatalf("a session at version 3: %+v", si)
		}
		// The leader writes what version 3 carries (fsm.Downgrade).
		if r, err := node.ProposeAsLeader(ctx, leader, fsm.SetLimits{Limits: fsm.DefaultLimits()}); err != nil || leader.Status().Limits != old {
			t.Fatalf("the limits of version 4 at version 3: %v %+v, limits %+v", err, r, leader.Status().Limits)
		}

		oldMax.Store(0) // upgraded
		waitClusterVersion(t, c, fsm.MaxClusterVersion)
		c.Eventually(10*time.Second, func() (bool, string) {
			return c.Nodes[c.WaitLeader(time.Second)].Status().Limits == fsm.DefaultLimits(), "quotas not proposed at version 4"
		})
		li = c.WaitLeader(time.Second)
		follower = c.Nodes[c.Follower(li)]
		r = mustApply(t, follower, fsm.OpenSession{TTL: time.Hour, Node: "x"}, fsmwire.StatusOK)
		if si, _ := c.Nodes[li].Session(r.Session); si.Node != follower.ID() {
			t.Fatalf("a session at version 4 belongs to %q, not %q", si.Node, follower.ID())
		}
	})
}
