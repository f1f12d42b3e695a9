package lockapi

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/clustertest"
)

// waitClusterVersion waits until every node of c applies cluster version v.
func waitClusterVersion(t *testing.T, c *clustertest.Cluster, v uint64) {
	t.Helper()
	c.Eventually(10*time.Second, func() (bool, string) {
		for i, n := range c.Nodes {
			if got := n.Status().ClusterVersion; got < v {
				return false, fmt.Sprintf("%s at cluster version %d, want %d", c.ID(i), got, v)
			}
		}
		return true, ""
	})
}

// A holder whose lease lapses on the client first — its process paused, so
// its keepalives stopped — keeps its session's lock-delay: each waiter is
// granted no sooner than the delay after the holder's lease ended. The
// lapse is noticed by the holder's own library before the leader's expiry
// (the client's deadline is the earlier by design), which then closes the
// lost session (Session.lose); in the second case the holder also resumes
// and unlocks at once, its releases racing that close (Unlock after the
// lapse). Before, the close (and the releases) released the locks at once:
// the waiters were granted a few milliseconds after the lapse.
func TestLapsedHolderKeepsItsLockDelay(t *testing.T) {
	for _, resume := range []bool{false, true} {
		t.Run(fmt.Sprintf("unlock after the lapse %v", resume), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := startCluster(t, clustertest.Options{})
				waitClusterVersion(t, c, fsm.MaxClusterVersion)
				ctx := context.Background()
				const delay = 3 * time.Second
				holder := newSession(t, c, 1, WithLockDelay(delay))
				waiter := newSession(t, c, 2)
				var leases []*Lease
				granted := make(chan time.Time, 3)
				for i := range 3 {
					name := fmt.Sprintf("x%d", i)
					l, err := holder.Lock(ctx, name)
					if err != nil {
						t.Fatal(err)
					}
					leases = append(leases, l)
					go func() {
						l, err := waiter.Lock(ctx, name)
						if err != nil {
							t.Errorf("waiter: %v", err)
							close(granted)
							return
						}
						granted <- time.Now()
						l.Unlock(ctx)
					}()
				}
				synctest.Wait() // the waiters are queued

				holder.pauseKeepalives(true) // the holder's process pauses
				<-leases[0].Done()
				lapsed := time.Now()
				if resume {
					for _, l := range leases {
						l.Unlock(ctx)
					}
				}
				for range leases {
					at, ok := <-granted
					if !ok {
						t.FailNow()
					}
					if gap := at.Sub(lapsed); gap < delay {
						t.Errorf("a waiter was granted %v after the holder's lease lapsed; its lock-delay is %v", gap, delay)
					}
				}
			})
		})
	}
}

// Abandon ends a healthy session as a lapse would: its leases end at once,
// and the lock it held stays ungranted for its lock-delay (Close releases
// at once). Abandon after Close says the session is closed.
func TestAbandonKeepsTheLockDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := startCluster(t, clustertest.Options{})
		waitClusterVersion(t, c, fsm.MaxClusterVersion)
		ctx := context.Background()
		const delay = 3 * time.Second
		holder := newSession(t, c, 0, WithLockDelay(delay))
		waiter := newSession(t, c, 1)
		held, err := holder.Lock(ctx, "job")
		if err != nil {
			t.Fatal(err)
		}
		granted := make(chan time.Time, 1)
		go func() {
			l, err := waiter.Lock(ctx, "job")
			if err != nil {
				t.Errorf("waiter: %v", err)
				close(granted)
				return
			}
			granted <- time.Now()
			l.Unlock(ctx)
		}()
		synctest.Wait()
		var nilCtx context.Context
		if err := holder.Abandon(nilCtx); !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("Abandon(nil): %v", err)
		}
		start := time.Now()
		if err := holder.Abandon(ctx); err != nil {
			t.Fatalf("Abandon: %v", err)
		}
		if err := held.Err(); !errors.Is(err, ErrLeaseLost) || !errors.Is(err, ErrSessionExpired) {
			t.Fatalf("the abandoned session's lease: %v", err)
		}
		if st := holder.State(); st != StateLost {
			t.Fatalf("abandoned session in state %v", st)
		}
		if err := holder.Abandon(ctx); err != nil {
			t.Fatalf("a second Abandon: %v", err)
		}
		at, ok := <-granted
		if !ok {
			t.FailNow()
		}
		if gap := at.Sub(start); gap < delay {
			t.Fatalf("the waiter was granted %v after Abandon; the lock-delay is %v", gap, delay)
		}
		if err := waiter.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if err := waiter.Abandon(ctx); !errors.Is(err, ErrSessionClosed) {
			t.Fatalf("Abandon after Close: %v", err)
		}
	})
}
