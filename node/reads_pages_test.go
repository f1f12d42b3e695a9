package node_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/testing/clustertest"
	"github.com/raftlock/raftlock/node"
)

// A follower's listings page its local state: locks by name, sessions by
// id, one lock's waiters and shared grants by cursor; a bad cursor is
// ErrInvalidArgument.
func TestReadsPage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, li := readyCluster(t, clustertest.Options{})
		leader, follower := c.Nodes[li], c.Nodes[c.Follower(li)]
		ctx := context.Background()
		a := openSession(t, ctx, leader, time.Minute)
		b := openSession(t, ctx, leader, time.Minute)
		mustApply(t, leader, fsm.Acquire{Session: a, Lock: "x", Owner: newOwner()}, fsmwire.StatusGranted)
		mustApply(t, leader, fsm.Acquire{Session: a, Lock: "y", Owner: newOwner(), Shared: true}, fsmwire.StatusGranted)
		mustApply(t, leader, fsm.Acquire{Session: b, Lock: "y", Owner: newOwner(), Shared: true}, fsmwire.StatusGranted)
		for range 3 {
			mustApply(t, leader, fsm.Acquire{Session: b, Lock: "x", Owner: newOwner(), Wait: true}, fsmwire.StatusQueued)
		}
		if err := follower.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		if page, more := follower.Locks("", "", 1); len(page) != 1 || page[0].Name != "x" || !more || page[0].WaiterCount != 3 {
			t.Fatalf("first page of locks: %+v, more %v", page, more)
		}
		if page, more := follower.Locks("", "x", 1); len(page) != 1 || page[0].Name != "y" || more || page[0].SharedCount != 2 {
			t.Fatalf("second page of locks: %+v, more %v", page, more)
		}
		if page, more := follower.Sessions(a, 5); more || len(page) == 0 || page[0].ID != b {
			t.Fatalf("sessions after %d: %+v, more %v", a, page, more)
		}
		w1, next, err := follower.Waiters("x", "", 2)
		if err != nil || len(w1) != 2 || next == "" {
			t.Fatalf("waiters: %v %q %v", w1, next, err)
		}
		if w2, next, err := follower.Waiters("x", next, 2); err != nil || len(w2) != 1 || next != "" || w2[0].Owner == w1[1].Owner {
			t.Fatalf("waiters after the cursor: %v %q %v", w2, next, err)
		}
		if g, next, err := follower.SharedGrants("y", "", 5); err != nil || len(g) != 2 || next != "" || g[0].Session != a {
			t.Fatalf("shared grants: %+v %q %v", g, next, err)
		}
		for _, read := range []func() error{
			func() error { _, _, err := follower.Waiters("x", "nonsense", 2); return err },
			func() error { _, _, err := follower.SharedGrants("y", "1.0", 2); return err },
		} {
			if err := read(); !errors.Is(err, node.ErrInvalidArgument) || !errors.Is(err, fsm.ErrInvalidCursor) {
				t.Errorf("a bad cursor: %v", err)
			}
		}
	})
}
