package node_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/lockinfo"
	"github.com/raftlock/raftlock/internal/replica"
	"github.com/raftlock/raftlock/internal/testing/clustertest"
	"github.com/raftlock/raftlock/node"
)

// stallOn makes n's apply goroutine stop, once it has delivered the events
// of the entry granting owner o, until release is called.
func stallOn(n *node.Node, o lockinfo.OwnerID) (stalled <-chan uint64, release func()) {
	at := make(chan uint64, 1)
	gate := make(chan struct{})
	node.AfterDispatch(n, func(events []fsm.Event) {
		for _, e := range events {
			if e.Kind == fsmwire.EventGranted && e.Owner == o {
				at <- e.Index
				<-gate
				return
			}
		}
	})
	return at, func() { node.AfterDispatch(n, nil); close(gate) }
}

// Issue 14 #6: the leader wakes its local waiters while it applies an entry,
// before its proposer records the entry's index as the read index. A Sync
// on a third replica in that window used to return without covering an
// entry somebody had already observed.
func TestSyncCoversAnEntryTheLeaderAlreadyShowed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, li := readyCluster(t, clustertest.Options{})
		ctx := context.Background()
		leader, third := c.Nodes[li], c.Nodes[c.Follower(li)]
		s := openSession(t, ctx, leader, time.Minute)
		if err := third.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		o := newOwner()
		sub, err := replica.Of(leader).Subscribe(replica.EventFilter{Owner: o}, 8)
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Close()
		_, releaseThird := stallOn(third, o)
		leaderAt, releaseLeader := stallOn(leader, o)
		applied := make(chan error, 1)
		go func() {
			_, err := replica.Of(leader).Apply(ctx, fsm.Acquire{Session: s, Lock: "x", Owner: o})
			applied <- err
		}()
		var e fsm.Event
		select {
		case e = <-sub.C: // somebody on the leader saw the grant
		case <-time.After(5 * time.Second):
			t.Fatal("no grant event on the leader")
		}
		<-leaderAt // the leader's apply goroutine is in the window

		synced := make(chan error, 1)
		go func() { synced <- third.Sync(ctx) }()
		select {
		case err := <-synced:
			if got := replica.Of(third).AppliedIndex(); err == nil && got < e.Index {
				t.Errorf("Sync on a third replica returned at applied index %d, before the grant at %d the leader already showed", got, e.Index)
			}
		case <-time.After(time.Second):
			// Sync waits for the entry: right.
		}
		releaseLeader()
		releaseThird()
		if err := <-applied; err != nil {
			t.Fatal(err)
		}
		if err := third.Sync(ctx); err != nil || replica.Of(third).AppliedIndex() < e.Index {
			t.Fatalf("after release: %v, applied %d < %d", err, replica.Of(third).AppliedIndex(), e.Index)
		}
	})
}
