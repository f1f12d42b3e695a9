package node_test

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/nodeopts"
	"github.com/raftlock/raftlock/internal/replica"
	"github.com/raftlock/raftlock/internal/testing/clustertest"
	"github.com/raftlock/raftlock/node"
)

// skewedCluster starts 3 nodes whose leader wall clocks (the WallClock test hook,
// the stamps of log entries) are time.Now() plus offsets[i].
func skewedCluster(t *testing.T) (*clustertest.Cluster, []*atomic.Int64) {
	offsets := make([]*atomic.Int64, 3)
	for i := range offsets {
		offsets[i] = new(atomic.Int64)
	}
	c, _ := readyCluster(t, clustertest.Options{Configure: func(i int, cfg *node.Config) {
		off := offsets[i]
		nodeopts.Hooks(cfg).WallClock = func() time.Time { return time.Now().Add(time.Duration(off.Load())) }
	}})
	return c, offsets
}

// delayedLock makes lock "x" enter a lock-delay on n: a session with the
// given lock-delay takes it and goes silent; a live session waits for it.
// It returns subscriptions to the waiter's events and to the lock's.
func delayedLock(t *testing.T, n *node.Node, delay time.Duration) (waiter, lock *replica.Subscription) {
	t.Helper()
	ctx := context.Background()
	lockSub, err := replica.Of(n).Subscribe(replica.EventFilter{Lock: "x"}, 64)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lockSub.Close)
	r, err := replica.Of(n).Apply(ctx, fsm.OpenSession{TTL: 300 * time.Millisecond, LockDelay: delay})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := replica.Of(n).Apply(ctx, fsm.Acquire{Session: r.Session, Lock: "x", Owner: newOwner()}); err != nil {
		t.Fatal(err)
	}
	alive := openSession(t, ctx, n, time.Hour)
	o := newOwner()
	sub, err := replica.Of(n).Subscribe(replica.EventFilter{Owner: o}, 8)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := replica.Of(n).Apply(ctx, fsm.Acquire{Session: alive, Lock: "x", Owner: o, Wait: true}); err != nil || r.Status != fsmwire.StatusQueued {
		t.Fatalf("wait: %v %+v", err, r)
	}
	return sub, lockSub
}

// waitDelayStart returns when n applied the expiry that put lock "x" into
// its lock-delay (sub: a subscription to lock "x").
func waitDelayStart(t *testing.T, sub *replica.Subscription) time.Time {
	t.Helper()
	for {
		select {
		case e := <-sub.C:
			if e.Kind == fsmwire.EventReleased && e.DelayUntil != 0 {
				return time.Now()
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the lock did not enter its delay")
		}
	}
}

// waitGrant returns when the waiter got the lock, failing after limit.
func waitGrant(t *testing.T, sub *replica.Subscription, limit time.Duration) time.Time {
	t.Helper()
	deadline := time.After(limit)
	for {
		select {
		case e := <-sub.C:
			if e.Kind == fsmwire.EventGranted {
				return time.Now()
			}
		case <-deadline:
			t.Fatalf("the delayed lock was not granted within %v", limit)
		}
	}
}

// Issue 14 #3: a leader whose wall clock jumped a day ahead (and back) used
// to freeze FSM time: later lock-delays did not end for a day.
func TestLockDelayEndsOnTimeAfterLeaderClockJumpedADayAhead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, offsets := skewedCluster(t)
		leader := c.WaitLeader(time.Second)
		n := c.Nodes[leader]
		ctx := context.Background()
		offsets[leader].Store(int64(24 * time.Hour))
		openSession(t, ctx, n, time.Minute) // an entry stamped a day ahead
		offsets[leader].Store(0)

		const delay = 2 * time.Second
		sub, lockSub := delayedLock(t, n, delay)
		defer sub.Close()
		start := waitDelayStart(t, lockSub)
		if took := waitGrant(t, sub, delay+5*time.Second).Sub(start); took < delay {
			t.Fatalf("granted %v after the delay began, before the delay %v", took, delay)
		}
	})
}

// A leader whose clock jumps back an hour while a lock is delayed used to
// keep the delay for that hour.
func TestLockDelayEndsOnTimeAfterLeaderClockJumpedBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, offsets := skewedCluster(t)
		leader := c.WaitLeader(time.Second)
		n := c.Nodes[leader]
		const delay = 2 * time.Second
		sub, lockSub := delayedLock(t, n, delay)
		defer sub.Close()
		start := waitDelayStart(t, lockSub)
		offsets[leader].Store(int64(-time.Hour))
		openSession(t, context.Background(), n, time.Minute) // an entry stamped an hour back
		if took := waitGrant(t, sub, delay+5*time.Second).Sub(start); took < delay {
			t.Fatalf("granted %v after the delay began, before the delay %v", took, delay)
		}
	})
}

// A new leader whose wall clock is 10 s ahead used to end a delay at once:
// it must wait the full delay from its takeover.
func TestLockDelayNotShortenedByNewLeaderAhead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, offsets := skewedCluster(t)
		leader := c.WaitLeader(time.Second)
		for i := range offsets {
			if i != leader {
				offsets[i].Store(int64(10 * time.Second))
			}
		}
		f := c.Nodes[c.Follower(leader)]
		const delay = 8 * time.Second
		sub, lockSub := delayedLock(t, f, delay)
		defer sub.Close()
		start := waitDelayStart(t, lockSub)
		c.Crash(leader)
		c.WaitLeader(10 * time.Second)
		if took := waitGrant(t, sub, delay+10*time.Second).Sub(start); took < delay {
			t.Fatalf("granted %v after the delay began, before the delay %v", took, delay)
		}
	})
}
