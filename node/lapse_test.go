package node_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/lockinfo"
	"github.com/raftlock/raftlock/internal/replica"
	"github.com/raftlock/raftlock/node"
)

// The commands of cluster version 4 during a rolling upgrade. While a server
// supports version 3 only, a lapsed close is written as a plain close (the
// previous release's behaviour: the lock passes at once — the documented
// gap of the upgrade) and the revoke of a shared grant is refused with a
// clear error, through the leader and a follower alike; once every server
// supports version 4 both take effect.
func TestLapseAndSharedRevokeWaitForClusterVersion4(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var oldMax atomic.Uint64
		oldMax.Store(3)
		c := startWithOldServer(t, &oldMax)
		time.Sleep(5 * time.Second) // several version checks
		li := c.WaitLeader(time.Second)
		leader, follower := c.Nodes[li], c.Nodes[c.Follower(li)]
		if v := leader.Status().ClusterVersion; v != 3 {
			t.Fatalf("cluster version %d with a server of version 3", v)
		}
		ctx := context.Background()
		apply := func(n *node.Node, cmd fsm.Command) fsm.Result {
			t.Helper()
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			r, err := replica.Of(n).Apply(cctx, cmd)
			if err != nil {
				t.Fatalf("%s: %s: %v", n.ID(), fsm.OpOf(cmd), err)
			}
			return r
		}
		// holds opens a session with a 10 s lock-delay that holds lock, and
		// queues another session for it; it returns the first session and
		// the waiter's owner.
		holds := func(lock string) (lockinfo.SessionID, lockinfo.OwnerID) {
			t.Helper()
			a := apply(leader, fsm.OpenSession{TTL: time.Minute, LockDelay: 10 * time.Second}).Session
			b := openSession(t, ctx, leader, time.Minute)
			if r := apply(leader, fsm.Acquire{Session: a, Lock: lock, Owner: newOwner()}); r.Status != fsmwire.StatusGranted {
				t.Fatalf("acquire %s: %+v", lock, r)
			}
			w := newOwner()
			if r := apply(leader, fsm.Acquire{Session: b, Lock: lock, Owner: w, Wait: true}); r.Status != fsmwire.StatusQueued {
				t.Fatalf("queue for %s: %+v", lock, r)
			}
			return a, w
		}
		reader := openSession(t, ctx, leader, time.Minute)
		read := apply(leader, fsm.Acquire{Session: reader, Lock: "rw", Owner: newOwner(), Shared: true})

		for _, n := range []*node.Node{leader, follower} {
			lock := "x-" + n.ID()
			a, w := holds(lock)
			if r := apply(n, fsm.CloseSession{Session: a, Lapsed: true}); r.Status != fsmwire.StatusOK {
				t.Fatalf("%s: lapsed close at version 3: %+v", n.ID(), r)
			}
			if h, ok := n.Holder(lock); !ok || h.Owner != w {
				t.Fatalf("%s: at version 3 a lapsed close is a close: %s held by %+v (%v), want the waiter at once", n.ID(), lock, h, ok)
			}
			for _, tok := range []lockinfo.Token{read.Token, 0} {
				rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				_, err := n.Operator().Revoke(rctx, "rw", tok, "test", "")
				cancel()
				if !errors.Is(err, node.ErrInvalidArgument) || !strings.Contains(err.Error(), "cluster version 4") {
					t.Fatalf("%s: revoke of a read grant (token %d) at version 3: %v", n.ID(), tok, err)
				}
			}
		}
		if li, _ := leader.Lock("rw"); len(li.Shared) != 1 {
			t.Fatalf("refused revokes changed rw: %+v", li)
		}

		oldMax.Store(0) // upgraded
		waitClusterVersion(t, c, fsm.MaxClusterVersion)
		a, _ := holds("y")
		if r := apply(follower, fsm.CloseSession{Session: a, Lapsed: true}); r.Status != fsmwire.StatusOK {
			t.Fatalf("lapsed close at version 4: %+v", r)
		}
		if li, _ := follower.Lock("y"); li.Held || !li.Delayed || li.DelayFor != 10*time.Second {
			t.Fatalf("y after a lapsed close at version 4: %+v, want it in the 10 s lock-delay", li)
		}
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		rv, err := follower.Operator().Revoke(rctx, "rw", 0, "test", "the only reader")
		if err != nil || rv.Holder.Token != read.Token || !rv.Holder.Shared {
			t.Fatalf("revoke of the read grant at version 4: %v %+v", err, rv)
		}
		if li, ok := leader.Lock("rw"); ok {
			t.Fatalf("rw after its reader was revoked: %+v", li)
		}
	})
}
