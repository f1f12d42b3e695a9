package node_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/lockinfo"
	"github.com/raftlock/raftlock/internal/nodeopts"
	"github.com/raftlock/raftlock/internal/replica"
	"github.com/raftlock/raftlock/internal/testing/clustertest"
	"github.com/raftlock/raftlock/node"
)

// Leader churn: leaders that change faster than a session's TTL (or a
// lock-delay) must not keep a silent session alive, or a delayed lock
// ungranted, for as long as the churn lasts (etcd#9888, #9395; the lease
// model's today/churn and today/delay-churn, internal/testing/model/lease).

// churn changes leaders by operator transfers and measures what the bounds
// need: E, the longest time from a transfer's start until a new leader has
// taken over, and δ, the longest commit latency of a probe entry.
type churn struct {
	t          *testing.T
	c          *clustertest.Cluster
	maxE, maxD time.Duration
}

// leading returns the node that leads and has taken over, or -1.
func (ch *churn) leading() int {
	for i, n := range ch.c.Nodes {
		if n != nil && node.IsLeading(n) && n.IsLeader() {
			return i
		}
	}
	return -1
}

// change moves leadership away from the current leader and waits until
// another node has taken over; then it commits a probe entry there.
func (ch *churn) change() {
	ch.t.Helper()
	start := time.Now()
	old := ch.leading()
	if old < 0 {
		ch.t.Fatalf("no leader to depose: %s", ch.c.Describe())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := ch.c.Nodes[old].Operator().TransferLeadership(ctx, ""); err != nil {
		ch.t.Fatalf("transfer: %v", err)
	}
	for {
		if i := ch.leading(); i >= 0 && i != old {
			ch.maxE = max(ch.maxE, time.Since(start))
			ch.probe(i)
			return
		}
		if time.Since(start) > 5*time.Second {
			ch.t.Fatalf("no new leader took over: %s", ch.c.Describe())
		}
		time.Sleep(time.Millisecond)
	}
}

// probe commits a command through node i (the leader) and counts its
// latency in δ.
func (ch *churn) probe(i int) {
	ch.t.Helper()
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, _, err := replica.Of(ch.c.Nodes[i]).Propose(ctx, fsm.OpenSession{TTL: time.Hour, Description: "probe"}); err != nil {
		ch.t.Fatalf("probe: %v", err)
	}
	ch.maxD = max(ch.maxD, time.Since(start))
}

// lambda is the longest lag between an entry's commit and its apply on a
// follower: a follower learns the commit index from the leader's next
// AppendEntries, which the replication loop sends at the latest after a
// random CommitTimeout of up to twice the configured one (hashicorp/raft
// v1.7.3), plus one commit latency.
func (ch *churn) lambda() time.Duration {
	return 2*nodeopts.TestTiming().CommitTimeout + ch.maxD
}

// watchGrant returns when the waiter of sub is granted, as the node applies
// it (read by a goroutine of its own, so that it is timed while the test
// changes leaders), or the zero time if not within limit or once stop is
// called (which the test must do before it ends).
func watchGrant(sub *replica.Subscription, limit time.Duration) (granted <-chan time.Time, stop func()) {
	out := make(chan time.Time, 1)
	done := make(chan struct{})
	go func() {
		deadline := time.After(limit)
		for {
			select {
			case e := <-sub.C:
				if e.Kind == fsmwire.EventGranted {
					out <- time.Now()
					return
				}
			case <-deadline:
				out <- time.Time{}
				return
			case <-done:
				out <- time.Time{}
				return
			}
		}
	}()
	var once sync.Once
	return out, func() { once.Do(func() { close(done) }) }
}

// churnRuns runs test with 0, 2, 4 and 6 leader changes, each on a new
// cluster of 3 on fake time.
func churnRuns(t *testing.T, test func(t *testing.T, ch *churn, changes int)) {
	for _, changes := range []int{0, 2, 4, 6} {
		t.Run(fmt.Sprintf("%d changes", changes), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c, _ := readyCluster(t, clustertest.Options{})
				test(t, &churn{t: t, c: c}, changes)
			})
		})
	}
}

// queueWaiter queues session s for lock through via and returns when the
// waiter is granted, as at applies it (watchGrant: stop must be called).
func queueWaiter(t *testing.T, at, via *node.Node, s lockinfo.SessionID, lock string) (granted <-chan time.Time, stop func()) {
	t.Helper()
	o := newOwner()
	sub, err := replica.Of(at).Subscribe(replica.EventFilter{Owner: o}, 8)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sub.Close)
	mustApply(t, via, fsm.Acquire{Session: s, Lock: lock, Owner: o, Wait: true}, fsmwire.StatusQueued)
	return watchGrant(sub, 30*time.Second)
}

// Issue 45 item 9: a session that stopped renewing at T (the last keepalive
// a leader accepted) loses its lock to the waiter by
// T + 2·(TTL + ElectionTimeout) + 2·E + 3·δ + λ, however many leader changes
// come, each less than a TTL after the one before; a session that keeps
// renewing keeps its lease across all of them.
func TestSilentSessionEndsWithinBoundUnderLeaderChurn(t *testing.T) {
	churnRuns(t, func(t *testing.T, ch *churn, changes int) {
		c, ctx := ch.c, context.Background()
		leader := c.WaitLeader(time.Second)
		const ttl, spacing = time.Second, 900 * time.Millisecond
		n := c.Nodes[leader]
		holder := openSession(t, ctx, n, ttl)
		mustApply(t, n, fsm.Acquire{Session: holder, Lock: "x", Owner: newOwner()}, fsmwire.StatusGranted)
		live := openSession(t, ctx, n, ttl)
		grant, stopWatch := queueWaiter(t, c.Nodes[0], n, live, "x")
		defer stopWatch()
		k := keepAlive(c.Nodes[0], live, ttl)
		defer k.halt()

		// The holder renews a few times, then stops: T is when its
		// last keepalive was accepted (after it arrived).
		for range 3 {
			time.Sleep(ttl / 4)
			if err := replica.Of(n).KeepAlive(ctx, holder); err != nil {
				t.Fatal(err)
			}
		}
		last := time.Now()
		for i := 1; i <= changes; i++ {
			time.Sleep(time.Until(last.Add(time.Duration(i) * spacing)))
			ch.change()
		}
		granted := <-grant
		if granted.IsZero() {
			t.Fatalf("the waiter was never granted: %s", c.Describe())
		}
		g := ttl + nodeopts.TestTiming().ElectionTimeout
		bound := 2*g + 2*ch.maxE + 3*ch.maxD + ch.lambda()
		t.Logf("%d changes: granted %v after the holder's last keepalive (bound %v: E %v, δ %v, λ %v)",
			changes, granted.Sub(last), bound, ch.maxE, ch.maxD, ch.lambda())
		if took := granted.Sub(last); took > bound {
			t.Fatalf("%d leader changes: the silent holder's lock went to the waiter %v after its last keepalive, beyond the bound %v",
				changes, took, bound)
		}
		for _, err := range k.halt() {
			if errors.Is(err, replica.ErrSessionExpired) {
				t.Fatalf("a renewing session expired across the leader changes: %v", err)
			}
		}
		if _, ok := c.Nodes[0].Session(live); !ok {
			t.Fatal("the renewing session is gone")
		}
		// Replicas applied the markers at different times: the
		// state is the same.
		requireConverged(t, ctx, c.Nodes...)
	})
}

// A lock-delay that began at D ends by D + LockDelay + E + 2·δ + λ however
// many leader changes come meanwhile (the lease model's today/delay-churn:
// every new leader used to time the delay again in full).
func TestLockDelayEndsWithinBoundUnderLeaderChurn(t *testing.T) {
	churnRuns(t, func(t *testing.T, ch *churn, changes int) {
		c, ctx := ch.c, context.Background()
		leader := c.WaitLeader(time.Second)
		const ttl, delay, spacing = time.Second, 2 * time.Second, 1200 * time.Millisecond
		n := c.Nodes[leader]
		// The delay begins when the leader applies the release (a
		// follower may apply it later than the grant that ends it).
		lockSub, err := replica.Of(n).Subscribe(replica.EventFilter{Lock: "x"}, 64)
		if err != nil {
			t.Fatal(err)
		}
		defer lockSub.Close()
		holder := mustApply(t, n, fsm.OpenSession{TTL: ttl, LockDelay: delay}, fsmwire.StatusOK).Session
		defer keepAlive(c.Nodes[0], holder, ttl).halt()
		ho := newOwner()
		mustApply(t, n, fsm.Acquire{Session: holder, Lock: "x", Owner: ho}, fsmwire.StatusGranted)
		live := openSession(t, ctx, n, ttl)
		defer keepAlive(c.Nodes[0], live, ttl).halt()
		grant, stopWatch := queueWaiter(t, c.Nodes[0], n, live, "x")
		defer stopWatch()

		// The holder's lapsed release starts the delay.
		mustApply(t, n, fsm.Release{Session: holder, Lock: "x", Owner: ho, Lapsed: true}, fsmwire.StatusOK)
		began := waitDelayStart(t, lockSub)
		for i := 1; i <= changes; i++ {
			time.Sleep(time.Until(began.Add(time.Duration(i) * spacing)))
			ch.change()
		}
		granted := <-grant
		if granted.IsZero() {
			t.Fatalf("the waiter was never granted: %s", c.Describe())
		}
		bound := delay + ch.maxE + 2*ch.maxD + ch.lambda()
		t.Logf("%d changes: granted %v after the delay began (bound %v: E %v, δ %v, λ %v)",
			changes, granted.Sub(began), bound, ch.maxE, ch.maxD, ch.lambda())
		switch took := granted.Sub(began); {
		case took < delay:
			t.Fatalf("granted %v after the delay began, before the delay %v", took, delay)
		case took > bound:
			t.Fatalf("%d leader changes: the delayed lock went to the waiter %v after the delay began, beyond the bound %v",
				changes, took, bound)
		}
	})
}
