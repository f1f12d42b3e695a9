package node_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/lockinfo"
	"github.com/raftlock/raftlock/internal/replica"
	"github.com/raftlock/raftlock/node"
)

// A hand-off to a waiter on a follower is announced by the leader: a
// subscription with EarlyGrants receives the grant, usually before the
// follower has applied it (the follower learns the commit only with raft's
// next AppendEntries), and the applied event still follows, for every
// subscription. "Before" is a race the announcement normally wins, not a
// guarantee (raft's AppendEntries can carry the commit first: about 1 in
// 300 runs here), so the test runs a few hand-offs and requires every
// announcement to be right and at least one to be early.
func TestGrantAnnouncedToFollower(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, l, f, sl, sf := leaderAndFollowerSessions(t)
		if _, err := replica.Of(f).Subscribe(replica.EventFilter{Lock: "l", EarlyGrants: true}, 1); !errors.Is(err, node.ErrInvalidArgument) {
			t.Fatalf("EarlyGrants with a Lock filter: %v", err)
		}
		early := 0
		for round := 0; round < 5; round++ {
			if announcedEarly(t, ctx, l, f, sl, sf, fmt.Sprintf("l%d", round)) {
				early++
			}
		}
		if early == 0 {
			t.Fatal("in 5 hand-offs, the follower had always applied the grant before its announcement arrived")
		}
	})
}

// leaderAndFollowerSessions starts an in-memory cluster and opens a
// session on its leader (sl) and on a follower (sf); ctx bounds the test
// (10 s of the bubble's time).
func leaderAndFollowerSessions(t *testing.T) (ctx context.Context, l, f *node.Node, sl, sf lockinfo.SessionID) {
	t.Helper()
	c, leader := startMemCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	l, f = c.Nodes[leader], c.Nodes[c.Follower(leader)]
	return ctx, l, f, openSession(t, ctx, l, time.Minute), openSession(t, ctx, f, time.Minute)
}

// announcedEarly hands lock name over from a holder on l to a waiter on f,
// checks the announcement and the applied event on f, and reports whether
// the announcement came before f applied the grant.
func announcedEarly(t *testing.T, ctx context.Context, l, f *node.Node, sl, sf lockinfo.SessionID, name string) bool {
	t.Helper()
	holder, waiter := newOwner(), newOwner()
	first, err := replica.Of(l).Apply(ctx, fsm.Acquire{Session: sl, Lock: name, Owner: holder})
	if err != nil || first.Status != fsmwire.StatusGranted {
		t.Fatalf("holder: %v %+v", err, first)
	}
	if r, err := replica.Of(f).Apply(ctx, fsm.Acquire{Session: sf, Lock: name, Owner: waiter, Wait: true}); err != nil || r.Status != fsmwire.StatusQueued {
		t.Fatalf("waiter: %v %+v", err, r)
	}
	early, err := replica.Of(f).Subscribe(replica.EventFilter{Owner: waiter, EarlyGrants: true}, 8)
	if err != nil {
		t.Fatal(err)
	}
	defer early.Close()
	applied, err := replica.Of(f).Subscribe(replica.EventFilter{Session: sf}, 8)
	if err != nil {
		t.Fatal(err)
	}
	defer applied.Close()
	if err := f.Sync(ctx); err != nil {
		t.Fatal(err)
	}

	if r, err := replica.Of(l).Apply(ctx, fsm.Release{Lock: name, Owner: holder}); err != nil || r.Status != fsmwire.StatusOK {
		t.Fatalf("release: %v %+v", err, r)
	}
	var e fsm.Event
	select {
	case e = <-early.C:
	case <-ctx.Done():
		t.Fatal("no grant announced")
	}
	if e.Kind != fsmwire.EventGranted || e.Owner != waiter || e.Session != sf || e.Lock != name || e.Token <= first.Token {
		t.Fatalf("announced %+v, want the waiter's grant with a token above %d", e, first.Token)
	}
	wasEarly := replica.Of(f).AppliedIndex() < e.Index
	// The applied event follows, on both subscriptions (on the early one
	// too when the announcement came first), with the same grant.
	subs := []*replica.Subscription{applied}
	if wasEarly {
		subs = append(subs, early)
	}
	for _, sub := range subs {
		select {
		case a := <-sub.C:
			if a.Kind != fsmwire.EventGranted || a.Owner != waiter || a.Token != e.Token || a.Index != e.Index {
				t.Fatalf("applied %+v, announced %+v", a, e)
			}
			// Delivered from the FSM's apply: the local state already has
			// the grant (the applied index itself advances just after the
			// dispatch, so that a WaitApplied caller finds its events
			// delivered).
			if h, ok := f.Holder(name); !ok || h.Owner != waiter || h.Token != e.Token {
				t.Fatalf("applied event, but the follower's state has holder %+v (held %v)", h, ok)
			}
		case <-ctx.Done():
			t.Fatal("the applied grant never came")
		}
	}
	return wasEarly
}

// With OnEarlyGrant, an announced grant goes to the hook (on the goroutine
// that received the announcement) and not to C; the applied grant still
// arrives on C, once. A hook without EarlyGrants is refused.
func TestEarlyGrantHook(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, l, f, sl, sf := leaderAndFollowerSessions(t)
		hook := func(fsm.Event) {}
		if _, err := replica.Of(f).Subscribe(replica.EventFilter{Session: sf, OnEarlyGrant: hook}, 1); !errors.Is(err, node.ErrInvalidArgument) {
			t.Fatalf("OnEarlyGrant without EarlyGrants: %v", err)
		}

		holder, waiter := newOwner(), newOwner()
		first, err := replica.Of(l).Apply(ctx, fsm.Acquire{Session: sl, Lock: "h", Owner: holder})
		if err != nil || first.Status != fsmwire.StatusGranted {
			t.Fatalf("holder: %v %+v", err, first)
		}
		if r, err := replica.Of(f).Apply(ctx, fsm.Acquire{Session: sf, Lock: "h", Owner: waiter, Wait: true}); err != nil || r.Status != fsmwire.StatusQueued {
			t.Fatalf("waiter: %v %+v", err, r)
		}
		hooked := make(chan fsm.Event, 8)
		sub, err := replica.Of(f).Subscribe(replica.EventFilter{Owner: waiter, EarlyGrants: true, OnEarlyGrant: func(e fsm.Event) { hooked <- e }}, 8)
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Close()
		if err := f.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		if r, err := replica.Of(l).Apply(ctx, fsm.Release{Lock: "h", Owner: holder}); err != nil || r.Status != fsmwire.StatusOK {
			t.Fatalf("release: %v %+v", err, r)
		}
		if err := f.Sync(ctx); err != nil { // the follower has applied the grant
			t.Fatal(err)
		}
		synctest.Wait() // and the announcement has been handled

		if len(hooked) != 1 {
			t.Fatalf("the hook got %d announced grants, want 1", len(hooked))
		}
		e := <-hooked
		if e.Kind != fsmwire.EventGranted || e.Owner != waiter || e.Session != sf || e.Lock != "h" || e.Token <= first.Token {
			t.Fatalf("hook got %+v, want the waiter's grant with a token above %d", e, first.Token)
		}
		if len(sub.C) != 1 {
			t.Fatalf("C holds %d events, want only the applied grant", len(sub.C))
		}
		if a := <-sub.C; a.Kind != fsmwire.EventGranted || a.Owner != waiter || a.Token != e.Token || a.Index != e.Index {
			t.Fatalf("applied %+v, announced %+v", a, e)
		}
	})
}
