package lockapi

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raftlock/raftlock/internal/testing/clustertest"
)

// Workers on three replicas share a semaphore of 4 permits: never more
// than 4 permits are held at once (as the leases themselves say), every
// grant has its own token, and everything is returned at the end.
func TestSemaphoreBoundsHoldersAcrossReplicas(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := startCluster(t, clustertest.Options{})
		ctx := context.Background()
		sem := Semaphore{Name: "pool:gpu", Limit: 4}
		var mu sync.Mutex
		held, peak := 0, 0
		tokens := map[uint64]bool{}
		var wg sync.WaitGroup
		for w := range 9 {
			s := newSession(t, c, w%3)
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 5 {
					n := 1 + w%2
					l, err := s.Acquire(ctx, sem, n)
					if err != nil {
						t.Errorf("worker %d: %v", w, err)
						return
					}
					mu.Lock()
					held += n
					peak = max(peak, held)
					if held > sem.Limit || tokens[uint64(l.Token())] || l.Permits() != n {
						t.Errorf("worker %d: %d permits held, token %d seen before %v", w, held, l.Token(), tokens[uint64(l.Token())])
					}
					tokens[uint64(l.Token())] = true
					mu.Unlock()
					time.Sleep(20 * time.Millisecond)
					mu.Lock()
					held -= n
					mu.Unlock()
					if err := l.Unlock(ctx); err != nil {
						t.Errorf("worker %d: unlock: %v", w, err)
					}
				}
			}()
		}
		wg.Wait()
		if peak != sem.Limit {
			t.Fatalf("peak %d permits held, want the limit %d", peak, sem.Limit)
		}
		c.Eventually(5*time.Second, func() (bool, string) {
			return c.Nodes[0].Stats().PermitsHeld == 0 && c.Nodes[0].Stats().Semaphores == 0, "permits left held"
		})
	})
}

// The limit is the semaphore's: another limit, or the name used as a lock,
// is refused with a ConflictError; TryAcquire says how many permits are
// free; bad arguments are refused before anything is sent.
func TestSemaphoreArgumentsAndConflicts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := startCluster(t, clustertest.Options{})
		ctx := context.Background()
		a, b := newSession(t, c, 0), newSession(t, c, 1)
		sem := Semaphore{Name: "pool", Limit: 3}
		if _, err := a.Acquire(ctx, sem, 2); err != nil {
			t.Fatal(err)
		}
		var ce *ConflictError
		if _, err := b.Acquire(ctx, Semaphore{Name: "pool", Limit: 5}, 1); !errors.As(err, &ce) || ce.Limit != 3 || !errors.Is(err, ErrConflict) {
			t.Fatalf("another limit: %v", err)
		}
		if _, err := b.Lock(ctx, "pool"); !errors.Is(err, ErrConflict) {
			t.Fatalf("lock on a semaphore: %v", err)
		}
		var le *LockedError
		if _, err := b.TryAcquire(ctx, sem, 2); !errors.As(err, &le) || le.Free != 1 || !errors.Is(err, ErrLocked) {
			t.Fatalf("try with 1 free: %v", err)
		}
		if l, err := b.TryAcquire(ctx, sem, 1); err != nil || l.Permits() != 1 {
			t.Fatalf("try that fits: %v", err)
		}
		for name, n := range map[string]int{"zero": 0, "over the limit": 4} {
			if _, err := b.Acquire(ctx, sem, n); !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("%s: %v", name, err)
			}
		}
		if _, err := b.Acquire(ctx, Semaphore{Name: "", Limit: 1}, 1); !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("empty name: %v", err)
		}
		c.Eventually(5*time.Second, func() (bool, string) { // the session's replica applies it a moment later
			info, err := b.DescribeSemaphore("pool")
			return err == nil && info.Used == 3 && len(info.Holders) == 2, "describe: not 3 permits in 2 grants"
		})
		if _, err := b.DescribeSemaphore("nowhere"); err != nil {
			t.Fatalf("describe an unused name: %v", err)
		}
	})
}

// Permits come back when their holder's session ends — closed, expired
// because its process paused, or because its node crashed — and the
// waiters on other replicas are granted in FIFO order; a wait whose context
// ends leaves nothing queued.
func TestSemaphorePermitsReturnWhenSessionsEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := startCluster(t, clustertest.Options{Nodes: 3})
		ctx := context.Background()
		sem := Semaphore{Name: "pool", Limit: 2}
		leader := c.WaitLeader(time.Second)
		f := c.Follower(leader)
		crashing := newSession(t, c, f)
		pausing := newSession(t, c, leader)
		if _, err := crashing.Acquire(ctx, sem, 1); err != nil {
			t.Fatal(err)
		}
		if _, err := pausing.Acquire(ctx, sem, 1); err != nil {
			t.Fatal(err)
		}
		waiter := newSession(t, c, leader)
		tctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		if _, err := waiter.Acquire(tctx, sem, 2); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("wait with a deadline: %v", err)
		}
		cancel()
		waiter.flushBackground(t)
		if li, _ := c.Nodes[leader].Lock("pool"); len(li.Waiters) != 0 {
			t.Fatalf("a withdrawn wait is left queued: %+v", li.Waiters)
		}
		got := make(chan *Lease, 1)
		go func() {
			l, err := waiter.Acquire(ctx, sem, 2)
			if err != nil {
				t.Error(err)
			}
			got <- l
		}()
		c.Crash(f)
		pausing.pauseKeepalives(true)
		select {
		case l := <-got:
			if l.Permits() != 2 {
				t.Fatalf("granted %d permits", l.Permits())
			}
		case <-time.After(10 * testTTL):
			t.Fatal("the permits of the crashed and the paused session never came back")
		}
		if err := pausing.Err(); !errors.Is(err, ErrSessionExpired) {
			t.Fatalf("the paused session: %v", err)
		}
	})
}
