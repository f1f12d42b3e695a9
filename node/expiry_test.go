package node_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/lockinfo"
	"github.com/raftlock/raftlock/internal/nodeopts"
	"github.com/raftlock/raftlock/internal/replica"
	"github.com/raftlock/raftlock/node"
)

// keeper sends keepalives for a session every ttl/3 until stopped.
type keeper struct {
	stop chan struct{}
	done chan struct{}
	once sync.Once
	mu   sync.Mutex
	errs []error
}

func keepAlive(n *node.Node, s lockinfo.SessionID, ttl time.Duration) *keeper {
	k := &keeper{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(k.done)
		for {
			select {
			case <-k.stop:
				return
			case <-time.After(ttl / 3):
			}
			ctx, cancel := context.WithTimeout(context.Background(), ttl/3)
			err := replica.Of(n).KeepAlive(ctx, s)
			cancel()
			if err != nil {
				k.mu.Lock()
				k.errs = append(k.errs, err)
				k.mu.Unlock()
			}
		}
	}()
	return k
}

// halt stops the keepalives (a second halt, deferred for a failing test,
// only waits) and returns their errors.
func (k *keeper) halt() []error {
	k.once.Do(func() { close(k.stop) })
	<-k.done
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.errs
}

func TestKeepAliveRenewsAndRefusesAfterDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, leader := startMemCluster(t)
		f := c.Nodes[c.Follower(leader)]
		ctx := context.Background()
		const ttl = time.Second
		s := openSession(t, ctx, f, ttl)

		// Renewed through the follower for several TTLs: the session lives.
		for range 9 {
			time.Sleep(ttl / 3)
			if err := replica.Of(f).KeepAlive(ctx, s); err != nil {
				t.Fatalf("keepalive: %v", err)
			}
		}
		if _, ok := f.Session(s); !ok {
			t.Fatal("session expired although renewed")
		}
		// Silence past the TTL: the leader expires it, and a late keepalive
		// is refused.
		time.Sleep(ttl + 200*time.Millisecond)
		if err := replica.Of(f).KeepAlive(ctx, s); !errors.Is(err, replica.ErrSessionExpired) {
			t.Fatalf("late keepalive: %v", err)
		}
		if err := f.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		if _, ok := f.Session(s); ok {
			t.Fatal("session still present after its TTL")
		}
		if err := replica.Of(c.Nodes[leader]).KeepAlive(ctx, 12345); !errors.Is(err, replica.ErrSessionExpired) {
			t.Fatalf("keepalive of an unknown session: %v", err)
		}
	})
}

// A leader change does not expire the sessions of live clients (takeover
// grace), but a client that stopped renewing loses its session after the TTL
// and its lock goes to the next waiter with a higher token.
func TestLeaderKillKeepsLiveSessionsExpiresSilentOnes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, leader := startMemCluster(t)
		ctx := context.Background()
		const ttl = 600 * time.Millisecond
		others := []int{}
		for i := range c.Nodes {
			if i != leader {
				others = append(others, i)
			}
		}
		a, b := c.Nodes[others[0]], c.Nodes[others[1]]
		live := openSession(t, ctx, a, ttl)
		silent := openSession(t, ctx, b, ttl)
		waiter := openSession(t, ctx, a, ttl)
		kLive := keepAlive(a, live, ttl)
		kWaiter := keepAlive(a, waiter, ttl)

		held := newOwner()
		r, err := replica.Of(b).Apply(ctx, fsm.Acquire{Session: silent, Lock: "job", Owner: held})
		if err != nil || r.Status != fsmwire.StatusGranted {
			t.Fatalf("acquire: %v %+v", err, r)
		}
		next := newOwner()
		sub, err := replica.Of(a).Subscribe(replica.EventFilter{Owner: next}, 8)
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Close()
		if r2, err := replica.Of(a).Apply(ctx, fsm.Acquire{Session: waiter, Lock: "job", Owner: next, Wait: true}); err != nil || r2.Status != fsmwire.StatusQueued {
			t.Fatalf("queue: %v %+v", err, r2)
		}

		start := time.Now()
		c.Crash(leader)
		newLeader := c.WaitLeader(10 * time.Second)
		if newLeader == leader {
			t.Fatal("crashed node still leader")
		}
		// A new leader within a few election timeouts (fake time: exact).
		if took, limit := time.Since(start), 10*nodeopts.TestTiming().ElectionTimeout; took > limit {
			t.Fatalf("new leader after %v, more than %v", took, limit)
		}
		// The waiter on node a is woken by its own replica when the silent
		// session expires — no polling.
		var ev fsm.Event
		for ev.Kind != fsmwire.EventGranted {
			select {
			case ev = <-sub.C:
			case <-time.After(10 * ttl):
				t.Fatal("waiter not granted after the holder's session expired")
			}
		}
		if ev.Token <= r.Token {
			t.Fatalf("new token %d not above %d", ev.Token, r.Token)
		}
		if waited := time.Since(start); waited < ttl {
			t.Fatalf("lock handed over after %v, before the TTL %v", waited, ttl)
		}
		time.Sleep(3 * ttl)
		for _, id := range []lockinfo.SessionID{live, waiter} {
			if _, ok := a.Session(id); !ok {
				t.Fatalf("live session %d expired across the leader change", id)
			}
		}
		if errs := kLive.halt(); len(errs) > 0 {
			t.Fatalf("keepalives of the live session failed: %v", errs)
		}
		kWaiter.halt()
	})
}

func TestLockDelayAfterExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, _ := startMemCluster(t)
		ctx := context.Background()
		n := c.Nodes[0]
		const ttl, delay = 300 * time.Millisecond, 2 * time.Second
		start := time.Now() // the dead session's lease starts after this
		r, err := replica.Of(n).Apply(ctx, fsm.OpenSession{TTL: ttl, LockDelay: delay})
		if err != nil {
			t.Fatal(err)
		}
		dead := r.Session
		if _, err := replica.Of(n).Apply(ctx, fsm.Acquire{Session: dead, Lock: "x", Owner: newOwner()}); err != nil {
			t.Fatal(err)
		}
		alive := openSession(t, ctx, n, time.Minute)
		o := newOwner()
		sub, _ := replica.Of(n).Subscribe(replica.EventFilter{Owner: o}, 8)
		defer sub.Close()
		if _, err := replica.Of(n).Apply(ctx, fsm.Acquire{Session: alive, Lock: "x", Owner: o, Wait: true}); err != nil {
			t.Fatal(err)
		}
		for {
			e := <-sub.C
			if e.Kind == fsmwire.EventGranted {
				break
			}
		}
		if waited := time.Since(start); waited < ttl+delay {
			t.Fatalf("granted after %v, before TTL + lock-delay %v", waited, ttl+delay)
		} else if waited > ttl+delay+time.Second {
			t.Fatalf("granted only after %v", waited)
		}
	})
}
