package lockapi

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/clustertest"
)

// injectAcquire commits an Acquire for s with an owner id s never made —
// what a delayed duplicate of an acquisition s gave up on looks like.
func injectAcquire(t *testing.T, c *clustertest.Cluster, s *Session, name string, wait bool) fsm.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err := c.Nodes[0].Apply(ctx, fsm.Acquire{Session: s.ID(), Lock: name, Owner: newOwnerID(), Wait: wait})
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
			if r := injectAcquire(t, c, s, name, false); r.Status != fsm.StatusGranted {
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
			if r := injectAcquire(t, c, s, name, true); r.Status != fsm.StatusQueued {
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
		if h, ok := c.Nodes[1].Holder("mine"); !ok || h.Owner != held.Owner() || held.Err() != nil {
			t.Fatalf("resync touched the session's own lease: %+v %v", h, held.Err())
		}
	})
}
