package lockapi

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/lockinfo"
	"github.com/raftlock/raftlock/internal/replica"
	"github.com/raftlock/raftlock/internal/testing/clustertest"
	"github.com/raftlock/raftlock/internal/testing/memnet"
	"github.com/raftlock/raftlock/node"
)

// injectAcquire commits an Acquire for s with an owner id s never made —
// what a delayed duplicate of an acquisition s gave up on looks like.
func injectAcquire(t *testing.T, c *clustertest.Cluster, s *Session, name string, wait bool) fsm.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err := replica.Of(c.Nodes[0]).Apply(ctx, fsm.Acquire{Session: lockinfo.SessionID(s.ID()), Lock: name, Owner: newOwnerID(), Wait: wait})
	if err != nil {
		t.Fatalf("inject acquire %q: %v", name, err)
	}
	return r
}

// settle lets the cluster's goroutines run and then reads through a
// linearizable barrier on node i.
func settle(t *testing.T, c *clustertest.Cluster, i int) {
	t.Helper()
	time.Sleep(100 * time.Millisecond)
	synctest.Wait()
	if err := c.Nodes[i].Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// A grant to the session under an owner id the session does not know is
// released at once, whichever replica the session runs on; so is a queue
// entry under an unknown owner. Nobody is left with ErrLocked.
func TestUnknownGrantIsReleased(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := startCluster(t, clustertest.Options{})
		ctx := context.Background()
		for i := range 3 {
			s := newSession(t, c, i)
			other := newSession(t, c, (i+1)%3)
			name := "ghost:" + clustertest.ID(i)
			if r := injectAcquire(t, c, s, name, false); r.Status != fsmwire.StatusGranted {
				t.Fatalf("injected acquire: %v", r.Status)
			}
			settle(t, c, i)
			if h, ok := c.Nodes[i].Holder(name); ok {
				t.Fatalf("session on %s: unknown grant still held: %+v", clustertest.ID(i), h)
			}
			l, err := other.TryLock(ctx, name)
			if err != nil {
				t.Fatalf("session on %s: another session's TryLock: %v", clustertest.ID(i), err)
			}

			// A queue entry under an unknown owner: dequeued, and never
			// granted to nobody when the holder releases.
			if r := injectAcquire(t, c, s, name, true); r.Status != fsmwire.StatusQueued {
				t.Fatalf("injected wait: %v", r.Status)
			}
			settle(t, c, i)
			if li, _ := c.Nodes[i].Lock(name); len(li.Waiters) != 0 {
				t.Fatalf("session on %s: unknown queue entry still queued: %+v", clustertest.ID(i), li.Waiters)
			}
			if err := l.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := other.TryLock(ctx, name); err != nil {
				t.Fatalf("session on %s: TryLock after the unlock: %v", clustertest.ID(i), err)
			}
		}
	})
}

// An unknown grant that the session missed (dropped events, a restored
// snapshot) is found by the resync scan of the session's locks.
func TestResyncReleasesUnknownGrant(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := startCluster(t, clustertest.Options{})
		s := newSession(t, c, 1)
		held, err := s.Lock(context.Background(), "mine")
		if err != nil {
			t.Fatal(err)
		}
		s.sub.Close() // the session misses every event from now on
		injectAcquire(t, c, s, "ghost", false)
		settle(t, c, 1)
		if _, ok := c.Nodes[1].Holder("ghost"); !ok {
			t.Fatal("the injected grant is not there to be found")
		}
		s.resync()
		settle(t, c, 1)
		if h, ok := c.Nodes[1].Holder("ghost"); ok {
			t.Fatalf("unknown grant still held after resync: %+v", h)
		}
		if h, ok := c.Nodes[1].Holder("mine"); !ok || OwnerID(h.Owner) != held.Owner() || held.Err() != nil {
			t.Fatalf("resync touched the session's own lease: %+v %v", h, held.Err())
		}
	})
}

// injectOwned commits an acquisition a of s under an owner id s never
// made, and returns that owner.
func injectOwned(t *testing.T, c *clustertest.Cluster, s *Session, a fsm.Acquire, want fsmwire.Status) lockinfo.OwnerID {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	a.Session, a.Owner = lockinfo.SessionID(s.ID()), newOwnerID()
	r, err := replica.Of(c.Nodes[0]).Apply(ctx, a)
	if err != nil || r.Status != want {
		t.Fatalf("inject %+v: %v %+v, want %v", a, err, r, want)
	}
	return a.Owner
}

// The resync releases every grant and wait of the session whose owner it
// does not know, of every kind: exclusive, read and semaphore grants, and
// waits for each. Before, it looked at the exclusive holder and the waiters
// only: a read grant or a semaphore's permits stayed held for the
// session's life.
func TestResyncReleasesUnknownGrantsOfEveryKind(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := startCluster(t, clustertest.Options{})
		ctx := context.Background()
		s := newSession(t, c, 1)
		other := newSession(t, c, 2)
		pool := Semaphore{Name: "pool", Limit: 2}
		busyPool := Semaphore{Name: "busy-pool", Limit: 2}
		if _, err := other.Lock(ctx, "busy"); err != nil {
			t.Fatal(err)
		}
		if _, err := other.Acquire(ctx, busyPool, 2); err != nil {
			t.Fatal(err)
		}
		mine, err := s.RLock(ctx, "mine")
		if err != nil {
			t.Fatal(err)
		}
		s.sub.Close() // the session misses every event from now on
		type acq struct {
			name  string
			owner lockinfo.OwnerID
		}
		unknown := []acq{
			{"ex", injectOwned(t, c, s, fsm.Acquire{Lock: "ex"}, fsmwire.StatusGranted)},
			{"rw", injectOwned(t, c, s, fsm.Acquire{Lock: "rw", Shared: true}, fsmwire.StatusGranted)},
			{"pool", injectOwned(t, c, s, fsm.Acquire{Lock: "pool", Limit: 2, Permits: 2}, fsmwire.StatusGranted)},
			{"busy", injectOwned(t, c, s, fsm.Acquire{Lock: "busy", Wait: true}, fsmwire.StatusQueued)},
			{"busy", injectOwned(t, c, s, fsm.Acquire{Lock: "busy", Wait: true, Shared: true}, fsmwire.StatusQueued)},
			{"busy-pool", injectOwned(t, c, s, fsm.Acquire{Lock: "busy-pool", Wait: true, Limit: 2, Permits: 1}, fsmwire.StatusQueued)},
			{"mine", injectOwned(t, c, s, fsm.Acquire{Lock: "mine", Shared: true}, fsmwire.StatusGranted)},
		}
		settle(t, c, 1)
		s.resync()
		settle(t, c, 1)
		s.flushBackground(t)
		settle(t, c, 1)
		for _, a := range unknown {
			if st := replica.Of(c.Nodes[1]).Owner(a.name, a.owner); st.Held || st.Position != 0 {
				t.Errorf("%s: an acquisition the session does not know is still there after the resync: %+v", a.name, st)
			}
		}
		if st := replica.Of(c.Nodes[1]).Owner("mine", lockinfo.OwnerID(mine.Owner())); !st.Held || mine.Err() != nil {
			t.Fatalf("resync touched the session's own read lease: %+v %v", st, mine.Err())
		}
		if l, err := other.TryLock(ctx, "rw"); err != nil {
			t.Errorf("a writer after the resync: %v", err)
		} else {
			l.Unlock(ctx)
		}
		if l, err := other.TryAcquire(ctx, pool, 2); err != nil {
			t.Errorf("the semaphore's permits after the resync: %v", err)
		} else {
			l.Unlock(ctx)
		}
	})
}

// The case of the issue end to end: a TryRLock through a follower commits
// but its answer never reaches the follower (the leader's bytes to it are
// lost), so the call gives up; cut off, the follower misses the entry, and
// back on the network it installs the leader's snapshot instead. The
// session's resync must then release the read grant it does not know:
// before, it stayed held, and a writer could never lock.
func TestUnknownReadGrantIsReleasedAfterASnapshotInstall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := memnet.New()
		c := startCluster(t, clustertest.Options{Net: net, Configure: func(i int, cfg *node.Config) {
			cfg.SnapshotThreshold = 32
			cfg.TrailingLogs = 2
			cfg.SnapshotInterval = 100 * time.Millisecond
		}})
		ctx := context.Background()
		l := c.WaitLeader(10 * time.Second)
		f := c.Follower(l)
		s := newSession(t, c, f, WithTTL(time.Minute)) // outlives the cut
		writer := newSession(t, c, l, WithTTL(time.Minute))
		restored, err := replica.Of(c.Nodes[f]).Subscribe(replica.EventFilter{Lock: "no such lock"}, 1)
		if err != nil {
			t.Fatal(err)
		}
		defer restored.Close()

		net.Block(c.RaftHost(l), c.RaftHost(f)) // the answer and the commit never reach the follower
		if _, err := s.TryRLock(ctx, "rw"); err == nil {
			t.Fatal("TryRLock succeeded without its answer")
		}
		if li, _ := c.Nodes[l].Lock("rw"); len(li.Shared) != 1 || SessionID(li.Shared[0].Session) != s.ID() {
			t.Fatalf("the read grant did not commit: %+v", li)
		}
		c.Isolate(f)
		for i := 0; c.Nodes[l].Status().LastIndex < 40; i++ {
			lease, err := writer.Lock(ctx, fmt.Sprintf("cut-%d", i))
			if err != nil {
				t.Fatal(err)
			}
			lease.Unlock(ctx)
		}
		time.Sleep(time.Second) // SnapshotInterval: the leader snapshots and compacts
		c.Heal()
		select {
		case <-restored.Resync:
		case <-time.After(30 * time.Second):
			t.Fatalf("the follower installed no snapshot: %s", c.Describe())
		}
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		lease, err := writer.Lock(wctx, "rw")
		if err != nil {
			li, _ := c.Nodes[l].Lock("rw")
			t.Fatalf("a writer after the resync: %v; rw: %+v", err, li)
		}
		lease.Unlock(ctx)
	})
}
