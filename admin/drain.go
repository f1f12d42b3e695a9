package admin

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/raftlock/raftlock/lockapi"
)

// drain is the first half of a graceful stop: it releases each lease HTTP
// clients hold once the window last reported for it (entry.promised) has
// ended, and returns when none is left, or with an error when ctx ends
// first. From its start no answer reports a window (get), so the windows
// can only end.
//
// Releasing a lease earlier would break what the client was told: another
// replica could grant the lock inside a window this one reported (the
// multi-process upgrade class caught a stop doing so). A lease whose window
// has not ended when ctx does is not released: its session is left to the
// node's close, after which the leader expires it, later than the window.
//
// A lease whose window ended has lapsed for its client, which may still be
// at work if it paused: it is released as a lapse, so that the lock-delay
// of the HTTP sessions holds (lockapi.Session.Abandon). A client-kept lease
// is released by abandoning its own session; the leases of the shared
// session all at once, by abandoning that session when none of them is
// inside a window any more (at most one window after the first of them
// ended: every window is within the shared session's validity). Leases
// added after the last scan report no window and are released with their
// sessions (closeOwn, the shared session's Close).
func (h *handles) drain(ctx context.Context) error {
	h.mu.Lock()
	h.stopping = true
	h.mu.Unlock()
	shared := make(map[*lockapi.Session]bool) // of due leases, to abandon together
	for {
		due, left, sharedLeft, next := h.due(time.Now())
		var wg sync.WaitGroup
		for _, e := range due {
			if s := e.lease.Session(); !e.own {
				shared[s] = true
			} else {
				wg.Go(func() { s.Abandon(ctx) })
			}
		}
		if sharedLeft == 0 {
			for s := range shared {
				wg.Go(func() { s.Abandon(ctx) })
			}
			clear(shared)
		}
		wg.Wait()
		if left == 0 {
			return nil
		}
		t := time.NewTimer(time.Until(next))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("admin: stop: %d leases are still inside the windows reported to their clients; their sessions are left to expire after the node closes: %w",
				left, ctx.Err())
		}
	}
}

// due marks the live leases whose windows ended by now for release and
// returns them, with the number of live leases left (and of those, the
// leases of the shared session) and when the first of their windows ends.
func (h *handles) due(now time.Time) (due []*entry, left, sharedLeft int, next time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, e := range h.m {
		switch {
		case e.releasing || e.lease.Err() != nil:
		case !e.promised.After(now):
			e.releasing = true
			due = append(due, e)
		default:
			left++
			if !e.own {
				sharedLeft++
			}
			if next.IsZero() || e.promised.Before(next) {
				next = e.promised
			}
		}
	}
	return due, left, sharedLeft, next
}
