package lockapi

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raftlock/raftlock/internal/testing/clustertest"
)

// Contenders on three replicas are granted in queue order; a waiter whose
// context ends is dequeued and never granted.
func TestFIFOAcrossReplicas(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := startCluster(t, clustertest.Options{})
		ctx := context.Background()
		holder := newSession(t, c, 0)
		first, err := holder.Lock(ctx, "q")
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var order []int
		var wg sync.WaitGroup
		sessions := []*Session{newSession(t, c, 1), newSession(t, c, 2), newSession(t, c, 0), newSession(t, c, 1)}
		quitter, quit := context.WithCancel(ctx)
		for i, s := range sessions {
			wg.Add(1)
			lctx := ctx
			if i == 2 {
				lctx = quitter
			}
			go func() {
				defer wg.Done()
				l, err := s.Lock(lctx, "q")
				if i == 2 {
					if !errors.Is(err, context.Canceled) {
						t.Errorf("waiter 2: %v", err)
					}
					return
				}
				if err != nil {
					t.Errorf("waiter %d: %v", i, err)
					return
				}
				mu.Lock()
				order = append(order, i)
				mu.Unlock()
				time.Sleep(10 * time.Millisecond)
				l.Unlock(ctx)
			}()
			synctest.Wait() // enqueue in this order
		}
		quit()
		synctest.Wait()
		sessions[2].flushBackground(t)
		if err := c.Nodes[0].Sync(ctx); err != nil {
			t.Fatal(err)
		}
		li, _ := c.Nodes[0].Lock("q")
		if len(li.Waiters) != 3 {
			t.Fatalf("%d waiters after one withdrew, want 3: %+v", len(li.Waiters), li.Waiters)
		}
		first.Unlock(ctx)
		wg.Wait()
		if want := []int{0, 1, 3}; len(order) != 3 || order[0] != 0 || order[1] != 1 || order[2] != 3 {
			t.Fatalf("grant order %v, want %v", order, want)
		}
	})
}

// A waiter whose session expires returns ErrSessionExpired promptly, not when
// its context ends.
func TestWaiterOfLostSessionFailsPromptly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := startCluster(t, clustertest.Options{})
		ctx := context.Background()
		holder := newSession(t, c, 0)
		if _, err := holder.Lock(ctx, "x"); err != nil {
			t.Fatal(err)
		}
		w := newSession(t, c, 1)
		done := make(chan error, 1)
		start := time.Now()
		go func() {
			_, err := w.Lock(ctx, "x") // no deadline
			done <- err
		}()
		synctest.Wait()
		w.pauseKeepalives(true)
		err := <-done
		if !errors.Is(err, ErrSessionExpired) {
			t.Fatalf("waiter: %v", err)
		}
		if took := time.Since(start); took > 2*testTTL {
			t.Fatalf("waiter returned after %v", took)
		}
		if st := w.State(); st != StateLost {
			t.Fatalf("session state %v", st)
		}
		if _, err := w.Lock(ctx, "y"); !errors.Is(err, ErrSessionExpired) {
			t.Fatalf("lock on a lost session: %v", err)
		}
	})
}

func TestTryLockReportsHolder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := startCluster(t, clustertest.Options{})
		ctx := context.Background()
		a := newSession(t, c, 0)
		b := newSession(t, c, 2)
		la, err := a.TryLock(ctx, "t")
		if err != nil {
			t.Fatal(err)
		}
		_, err = b.TryLock(ctx, "t")
		var le *LockedError
		if !errors.Is(err, ErrLocked) || !errors.As(err, &le) {
			t.Fatalf("TryLock of a held lock: %v", err)
		}
		if le.Holder.Token != la.Token() || le.Holder.Description != "n1/worker" || !strings.Contains(err.Error(), "n1/worker") {
			t.Fatalf("holder %+v (%v)", le.Holder, err)
		}
		la.Unlock(ctx)
		if lb, err := b.TryLock(ctx, "t"); err != nil || lb.Token() <= la.Token() {
			t.Fatalf("TryLock after unlock: %v", err)
		}
	})
}

func TestBadArguments(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := startCluster(t, clustertest.Options{})
		ctx := context.Background()
		n := c.Nodes[0]
		for name, opts := range map[string][]SessionOption{
			"zero TTL":     {WithTTL(0)},
			"negative TTL": {WithTTL(-time.Second)},
			"tiny TTL":     {WithTTL(MinTTL(n) - time.Millisecond)},
			"huge TTL":     {WithTTL(25 * time.Hour)},
			"lock-delay":   {WithLockDelay(-1)},
			"owner":        {WithOwner(strings.Repeat("x", 300))},
			"owner UTF-8":  {WithOwner("\xff")},
		} {
			if _, err := NewSession(ctx, n, opts...); !errors.Is(err, ErrInvalidArgument) {
				t.Errorf("%s: %v", name, err)
			}
		}
		if _, err := NewSession(ctx, nil); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("nil node: %v", err)
		}
		s := newSession(t, c, 0)
		for _, name := range []string{"", strings.Repeat("n", 513), "a\x00b", "\xff"} {
			if _, err := s.Lock(ctx, name); !errors.Is(err, ErrInvalidArgument) {
				t.Errorf("lock name %q: %v", name, err)
			}
			if _, err := s.TryLock(ctx, name); !errors.Is(err, ErrInvalidArgument) {
				t.Errorf("trylock name %q: %v", name, err)
			}
		}
		if err := s.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Lock(ctx, "a"); !errors.Is(err, ErrSessionClosed) {
			t.Errorf("lock on a closed session: %v", err)
		}
		if err := s.Close(ctx); err != nil {
			t.Errorf("second close: %v", err)
		}
		if st := c.Nodes[0].Stats(); st.Sessions != 0 {
			t.Errorf("sessions left in the cluster: %d", st.Sessions)
		}
	})
}

// Close releases what the session holds and waits for, at once.
func TestCloseReleasesEverything(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := startCluster(t, clustertest.Options{})
		ctx := context.Background()
		a := newSession(t, c, 0)
		b := newSession(t, c, 1)
		la, _ := a.Lock(ctx, "p")
		if _, err := a.Lock(ctx, "q"); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Lock(ctx, "r-held-by-b"); err != nil {
			t.Fatal(err)
		}
		waitErr := make(chan error, 1)
		go func() { _, err := a.Lock(ctx, "r-held-by-b"); waitErr <- err }()
		synctest.Wait() // a is queued behind b
		if err := a.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-waitErr; !errors.Is(err, ErrSessionClosed) {
			t.Fatalf("pending Lock after Close: %v", err)
		}
		if !errors.Is(la.Err(), ErrLeaseLost) || !errors.Is(la.Err(), ErrSessionClosed) {
			t.Fatalf("lease after Close: %v", la.Err())
		}
		n := c.Nodes[1]
		if err := n.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"p", "q"} {
			if h, ok := n.Holder(name); ok {
				t.Fatalf("%s still held by %+v", name, h)
			}
		}
		if li, _ := n.Lock("r-held-by-b"); len(li.Waiters) != 0 {
			t.Fatalf("closed session still queued: %+v", li.Waiters)
		}
	})
}
