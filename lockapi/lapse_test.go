package lockapi

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/testing/clustertest"
)

// grantedAt takes lock for s in the background; the channel gets when it
// was granted (the lease is then unlocked), or is closed if Lock failed.
func grantedAt(t *testing.T, s *Session, lock string) <-chan time.Time {
	ch := make(chan time.Time, 1)
	go func() {
		ctx := context.Background()
		l, err := s.Lock(ctx, lock)
		if err != nil {
			t.Errorf("lock %s: %v", lock, err)
			close(ch)
			return
		}
		ch <- time.Now()
		l.Unlock(ctx)
	}()
	return ch
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
				c.WaitClusterVersion(fsm.MaxClusterVersion, 10*time.Second)
				ctx := context.Background()
				const delay = 3 * time.Second
				holder := newSession(t, c, 1, WithLockDelay(delay))
				waiter := newSession(t, c, 2)
				var leases []*Lease
				var granted []<-chan time.Time
				for i := range 3 {
					name := fmt.Sprintf("x%d", i)
					l, err := holder.Lock(ctx, name)
					if err != nil {
						t.Fatal(err)
					}
					leases = append(leases, l)
					granted = append(granted, grantedAt(t, waiter, name))
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
				for _, ch := range granted {
					at, ok := <-ch
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
		c.WaitClusterVersion(fsm.MaxClusterVersion, 10*time.Second)
		ctx := context.Background()
		const delay = 3 * time.Second
		holder := newSession(t, c, 0, WithLockDelay(delay))
		waiter := newSession(t, c, 1)
		held, err := holder.Lock(ctx, "job")
		if err != nil {
			t.Fatal(err)
		}
		granted := grantedAt(t, waiter, "job")
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
