package node_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/replica"
	"github.com/raftlock/raftlock/node"
)

// The leader announces a hand-off grant only to the replica its waiter lives
// on: one notice for a waiter on a follower (the other follower gets none),
// none for a waiter on the leader itself (its own apply delivered it). Before
// the change every grant went to every other replica: two notices each.
func TestGrantAnnouncedOnlyToTheWaitersReplica(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, leader := startMemCluster(t)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		l, f := c.Nodes[leader], c.Nodes[c.Follower(leader)]
		holderSession := openSession(t, ctx, l, time.Minute)

		for _, tc := range []struct {
			name    string
			waiter  *node.Node
			notices float64
		}{
			{"waiter on a follower", f, 1},
			{"waiter on the leader", l, 0},
		} {
			ws := openSession(t, ctx, tc.waiter, time.Minute)
			holder, waiter := newOwner(), newOwner()
			if r, err := replica.Of(l).Apply(ctx, fsm.Acquire{Session: holderSession, Lock: tc.name, Owner: holder}); err != nil || r.Status != fsmwire.StatusGranted {
				t.Fatalf("%s: holder: %v %+v", tc.name, err, r)
			}
			if r, err := replica.Of(tc.waiter).Apply(ctx, fsm.Acquire{Session: ws, Lock: tc.name, Owner: waiter, Wait: true}); err != nil || r.Status != fsmwire.StatusQueued {
				t.Fatalf("%s: waiter: %v %+v", tc.name, err, r)
			}
			synctest.Wait()
			before := node.GrantAnnouncements(l, "ok")
			if r, err := replica.Of(l).Apply(ctx, fsm.Release{Lock: tc.name, Owner: holder}); err != nil || r.Status != fsmwire.StatusOK {
				t.Fatalf("%s: release: %v %+v", tc.name, err, r)
			}
			if err := tc.waiter.Sync(ctx); err != nil {
				t.Fatal(err)
			}
			if h, ok := tc.waiter.Holder(tc.name); !ok || h.Owner != waiter {
				t.Fatalf("%s: holder after the release %+v (held %v), want the waiter", tc.name, h, ok)
			}
			synctest.Wait() // the announcements' RPCs are done
			if got := node.GrantAnnouncements(l, "ok") - before; got != tc.notices {
				t.Errorf("%s: the leader sent %v grant notices, want %v", tc.name, got, tc.notices)
			}
		}
	})
}
