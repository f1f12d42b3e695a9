package node_test

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/replica"
	"github.com/raftlock/raftlock/internal/testing/clustertest"
	"github.com/raftlock/raftlock/node"
)

// Issue 45 item 8: a new leader reads the sessions and its clock, then
// replays the sessions opened while it read. Stalled between the two (its
// goroutine starved, or the heap of a million sessions), it used to give a
// session opened meanwhile the clock read before — a deadline that could
// precede the client's OpenSession — and expire it at once, handing its
// lock to the next waiter while the client's window (from when it sent the
// open: send + TTL − TTL/20) was still open. The replay must take its own
// time.
func TestSessionOpenedDuringTakeoverGetsItsFullLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, leader := readyCluster(t, clustertest.Options{})
		ctx := context.Background()
		const ttl = time.Second
		n := c.Nodes[leader]
		waiter := openSession(t, ctx, n, time.Minute)

		// Every node stalls its next takeover for 2·TTL after its read.
		var armed atomic.Bool
		read := make(chan struct{}, len(c.Nodes))
		for _, m := range c.Nodes {
			node.StallTakeover(m, func() {
				if armed.CompareAndSwap(true, false) {
					read <- struct{}{}
					time.Sleep(2 * ttl)
				}
			})
		}
		armed.Store(true)
		to, err := n.Operator().TransferLeadership(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		var nl *node.Node
		for i := range c.Nodes {
			if c.ID(i) == to {
				nl = c.Nodes[i]
			}
		}
		<-read // the new leader read the sessions and its clock
		time.Sleep(3 * ttl / 2)

		// A client opens a session through the new leader, takes the lock,
		// and the waiter queues behind it.
		sent := time.Now()
		s := mustApply(t, nl, fsm.OpenSession{TTL: ttl}, fsmwire.StatusOK).Session
		window := sent.Add(ttl - ttl/20) // what the client counts (lockapi: send + TTL − margin)
		mustApply(t, nl, fsm.Acquire{Session: s, Lock: "x", Owner: newOwner()}, fsmwire.StatusGranted)
		o := newOwner()
		sub, err := replica.Of(nl).Subscribe(replica.EventFilter{Owner: o}, 8)
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Close()
		mustApply(t, nl, fsm.Acquire{Session: waiter, Lock: "x", Owner: o, Wait: true}, fsmwire.StatusQueued)

		granted := waitGrant(t, sub, 10*time.Second)
		if granted.Before(window) {
			t.Fatalf("the waiter was granted %v before the window of the session opened during the takeover ended (opened %v after the takeover's read)",
				window.Sub(granted), 3*ttl/2)
		}
	})
}
