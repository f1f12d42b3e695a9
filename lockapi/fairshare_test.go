package lockapi

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/testing/clustertest"
	"github.com/raftlock/raftlock/node"
)

// The fair shares reach the application as ErrFairShare (and ErrQuota):
// NewSession beyond the node's share, a Lock beyond the session's share
// of the queue; another node, another session, and a session opened
// WithReserve still get theirs.
func TestFairSharesReachTheApplication(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim := fsm.DefaultLimits()
		lim.MaxSessions, lim.NodeShares, lim.MaxSessionWaitersPerLock = 16, 2, 2 // a node's share: 2 sessions, 4 held back
		c := startCluster(t, clustertest.Options{Configure: func(i int, cfg *node.Config) { cfg.Limits = lim }})
		c.WaitLimits(lim, 10*time.Second)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var err error
		opened := 0
		for ; err == nil; opened++ {
			var s *Session
			if s, err = NewSession(ctx, c.Nodes[0], WithTTL(time.Hour)); err == nil {
				t.Cleanup(func() { s.Close(context.Background()) })
			}
		}
		if opened-1 != 12 || !errors.Is(err, ErrFairShare) || !errors.Is(err, ErrQuota) {
			t.Fatalf("node 1 opened %d sessions, then: %v", opened-1, err)
		}
		t.Log(err)
		newSession(t, c, 1)                // another node
		newSession(t, c, 0, WithReserve()) // the reserve
		holder, waiter := newSession(t, c, 1), newSession(t, c, 2)
		if _, err := holder.TryLock(ctx, "l"); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() { waiter.Lock(ctx, "l") }) // waits until cancel
		}
		c.Eventually(10*time.Second, func() (bool, string) {
			li, _ := c.Nodes[2].Lock("l")
			return len(li.Waiters) == 2, "not queued yet"
		})
		if _, err := waiter.Lock(ctx, "l"); !errors.Is(err, ErrFairShare) || !errors.Is(err, ErrQuota) {
			t.Fatalf("a third wait of one session: %v", err)
		}
		other := newSession(t, c, 2)
		wctx, wcancel := context.WithTimeout(ctx, time.Second)
		defer wcancel()
		if _, err := other.Lock(wctx, "l"); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("another session's wait: %v", err)
		}
		cancel()
		wg.Wait()
	})
}
