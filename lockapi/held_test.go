package lockapi

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raftlock/raftlock/internal/testing/clustertest"
)

// A Lock of a name the session already holds answers ErrAlreadyHeld at
// once (it used to wait for its own release until its context ended), and
// so do TryLock, a read lock of a name held exclusively, the upgrade of a
// read lock, and more permits than the limit leaves beside the session's
// own; nothing is queued in the cluster. A second read grant and permits
// within the limit are granted; another session still waits as usual; once
// the session's grant is released, the name can be taken again.
func TestAcquireOfOwnGrantFailsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := startCluster(t, clustertest.Options{})
		s, other := newSession(t, c, 0), newSession(t, c, 1)
		bg := context.Background()
		held, err := s.Lock(bg, "invoice:842")
		if err != nil {
			t.Fatal(err)
		}
		reader, err := s.RLock(bg, "report")
		if err != nil {
			t.Fatal(err)
		}
		sem := Semaphore{Name: "pool", Limit: 3}
		two, err := s.Acquire(bg, sem, 2)
		if err != nil {
			t.Fatal(err)
		}

		for _, tc := range []struct {
			what string
			call func(context.Context) (*Lease, error)
		}{
			{"Lock of a lock held", func(ctx context.Context) (*Lease, error) { return s.Lock(ctx, "invoice:842") }},
			{"TryLock of a lock held", func(ctx context.Context) (*Lease, error) { return s.TryLock(ctx, "invoice:842") }},
			{"RLock of a lock held", func(ctx context.Context) (*Lease, error) { return s.RLock(ctx, "invoice:842") }},
			{"TryRLock of a lock held", func(ctx context.Context) (*Lease, error) { return s.TryRLock(ctx, "invoice:842") }},
			{"Lock of a lock read", func(ctx context.Context) (*Lease, error) { return s.Lock(ctx, "report") }},
			{"Acquire over the limit", func(ctx context.Context) (*Lease, error) { return s.Acquire(ctx, sem, 2) }},
			{"TryAcquire over the limit", func(ctx context.Context) (*Lease, error) { return s.TryAcquire(ctx, sem, 2) }},
		} {
			ctx, cancel := context.WithTimeout(bg, time.Minute)
			start := time.Now()
			l, err := tc.call(ctx)
			cancel()
			if !errors.Is(err, ErrAlreadyHeld) || l != nil {
				t.Errorf("%s: %v, %v; want ErrAlreadyHeld", tc.what, l, err)
			}
			if took := time.Since(start); took != 0 {
				t.Errorf("%s: answered after %v, want at once (nothing sent)", tc.what, took)
			}
		}
		for _, name := range []string{"invoice:842", "report", "pool"} {
			if li, _ := c.Nodes[0].Lock(name); len(li.Waiters) != 0 {
				t.Errorf("%s: %d waiters queued, want none", name, len(li.Waiters))
			}
		}

		// Allowed: a second reader, and a permit within the limit.
		if l, err := s.RLock(bg, "report"); err != nil || !l.Shared() {
			t.Errorf("second RLock: %v, %v", l, err)
		}
		if l, err := s.TryAcquire(bg, sem, 1); err != nil || l.Permits() != 1 {
			t.Errorf("permit within the limit: %v, %v", l, err)
		}
		_ = two

		// Another session waits, as ever.
		ctx, cancel := context.WithTimeout(bg, 2*time.Second)
		if _, err := other.Lock(ctx, "invoice:842"); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("another session's Lock: %v, want it to wait until its deadline", err)
		}
		cancel()

		// Released, the name can be taken again by the session (with a
		// newer token); an unlocked reader no longer blocks the upgrade.
		if err := held.Unlock(bg); err != nil {
			t.Fatal(err)
		}
		if again, err := s.Lock(bg, "invoice:842"); err != nil || again.Token() <= held.Token() {
			t.Errorf("Lock after Unlock: %v, %v", again, err)
		}
		if err := reader.Unlock(bg); err != nil {
			t.Fatal(err)
		}
		ctx, cancel = context.WithTimeout(bg, time.Minute) // bounded: this was a self-deadlock
		defer cancel()
		if l, err := s.Lock(ctx, "report"); !errors.Is(err, ErrAlreadyHeld) || l != nil {
			t.Errorf("Lock while the second reader holds: %v, %v", l, err)
		}
	})
}
