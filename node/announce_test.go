package node_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/clustertest"
	"github.com/raftlock/raftlock/internal/memnet"
	"github.com/raftlock/raftlock/node"
)

// A hand-off to a waiter on a follower is announced by the leader: a
// subscription with EarlyGrants receives the grant before the follower has
// applied it (the follower learns the commit only with raft's next
// AppendEntries), and the applied event still follows, for every
// subscription.
func TestGrantAnnouncedToFollower(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := clustertest.Start(t, clustertest.Options{Nodes: 3, Net: memnet.New()})
		leader := c.WaitLeader(10 * time.Second)
		c.WaitReady(10 * time.Second)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		l, f := c.Nodes[leader], c.Nodes[c.Follower(leader)]

		holder, waiter := newOwner(), newOwner()
		sl, sf := openSession(t, ctx, l, time.Minute), openSession(t, ctx, f, time.Minute)
		first, err := l.Apply(ctx, fsm.Acquire{Session: sl, Lock: "l", Owner: holder})
		if err != nil || first.Status != fsm.StatusGranted {
			t.Fatalf("holder: %v %+v", err, first)
		}
		if r, err := f.Apply(ctx, fsm.Acquire{Session: sf, Lock: "l", Owner: waiter, Wait: true}); err != nil || r.Status != fsm.StatusQueued {
			t.Fatalf("waiter: %v %+v", err, r)
		}
		if _, err := f.Subscribe(node.EventFilter{Lock: "l", EarlyGrants: true}, 1); !errors.Is(err, node.ErrInvalidArgument) {
			t.Fatalf("EarlyGrants with a Lock filter: %v", err)
		}
		early, err := f.Subscribe(node.EventFilter{Owner: waiter, EarlyGrants: true}, 8)
		if err != nil {
			t.Fatal(err)
		}
		defer early.Close()
		applied, err := f.Subscribe(node.EventFilter{Session: sf}, 8)
		if err != nil {
			t.Fatal(err)
		}
		defer applied.Close()
		if err := f.Sync(ctx); err != nil {
			t.Fatal(err)
		}

		if r, err := l.Apply(ctx, fsm.Release{Lock: "l", Owner: holder}); err != nil || r.Status != fsm.StatusOK {
			t.Fatalf("release: %v %+v", err, r)
		}
		var e fsm.Event
		select {
		case e = <-early.C:
		case <-ctx.Done():
			t.Fatal("no grant announced")
		}
		if e.Kind != fsm.EventGranted || e.Owner != waiter || e.Session != sf || e.Lock != "l" || e.Token <= first.Token {
			t.Fatalf("announced %+v, want the waiter's grant with a token above %d", e, first.Token)
		}
		if got := f.AppliedIndex(); got >= e.Index {
			t.Fatalf("the follower had already applied index %d (grant at %d): the announcement was not early", got, e.Index)
		}
		// The applied event follows, on both subscriptions, with the same grant.
		for _, sub := range []*node.Subscription{applied, early} {
			select {
			case a := <-sub.C:
				if a.Kind != fsm.EventGranted || a.Owner != waiter || a.Token != e.Token || a.Index != e.Index {
					t.Fatalf("applied %+v, announced %+v", a, e)
				}
				if f.AppliedIndex() < e.Index {
					t.Fatal("applied event before the follower applied the entry")
				}
			case <-ctx.Done():
				t.Fatal("the applied grant never came")
			}
		}
	})
}
