package node

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// verifier batches leadership confirmations: one round (confirmLeadership:
// ConfirmTerm from cluster version 4, raft's VerifyLeader below) is in
// flight at a time, and a round serves every caller that arrived before it
// started. A caller that arrives while a round is in flight waits for the
// next one — the running round may have started before the caller's request
// was received, so it cannot vouch for it.
//
// A caller may also say how long the next round may wait for others
// (confirmWithin): the round starts once the earliest such bound among its
// callers passes, or at once when a caller without one arrives. Each round
// sends a message to every other voter at once, so keepalives — which come
// steadily, a few milliseconds apart, and need no prompt answer — share a
// round instead of each costing one (TestKeepalivesShareLeadershipRounds).
// The guarantee is the same either way: a round that started after the
// caller arrived.
//
// stop must run before Raft shuts down: hashicorp/raft (v1.7.3) never
// answers a VerifyLeader request still queued when it shuts down (that
// future has no shutdown channel), so a round in flight then would block
// for ever, and Close with it. stop refuses new rounds and waits for the
// one in flight, which a running Raft answers (confirmed, or leadership
// lost within the leader lease timeout).
type verifier struct {
	verify func() error // one round (Node.confirmLeadership)
	wg     *sync.WaitGroup

	mu       sync.Mutex
	busy     bool
	stopped  bool
	next     *round
	inflight sync.WaitGroup
	rounds   atomic.Uint64 // rounds started (each costs Raft a heartbeat to every follower)
	// The next round's latest start while no round is in flight (zero: at
	// once), and the timer armed for it.
	startBy time.Time
	timer   *time.Timer
}

type round struct {
	done chan struct{}
	err  error
}

// confirm returns nil once a round that started after the call confirmed
// leadership, the round's error, or ctx's error; ErrClosed once stopped.
func (v *verifier) confirm(ctx context.Context) error { return v.confirmWithin(ctx, 0) }

// confirmWithin is confirm for a caller that lets the round start up to
// wait from now, for others to share it (wait ≤ 0: as confirm).
func (v *verifier) confirmWithin(ctx context.Context, wait time.Duration) error {
	v.mu.Lock()
	if v.stopped {
		v.mu.Unlock()
		return ErrClosed
	}
	if v.next == nil {
		v.next = &round{done: make(chan struct{})}
		v.startBy = time.Time{}
	}
	r := v.next
	by := time.Now().Add(wait)
	if v.startBy.IsZero() || by.Before(v.startBy) {
		v.startBy = by
	}
	if !v.busy {
		v.scheduleLocked()
	}
	v.mu.Unlock()
	select {
	case <-r.done:
		return r.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// scheduleLocked starts the next round now if it is due, or arms the timer
// for its latest start. Caller holds mu; no round is in flight.
func (v *verifier) scheduleLocked() {
	d := time.Until(v.startBy)
	if d <= 0 {
		v.startLocked()
		return
	}
	if v.timer == nil {
		v.timer = time.AfterFunc(d, v.due)
	} else {
		v.timer.Reset(d) // an earlier bound: moved up
	}
}

// due is the timer's callback: start the next round if it is still waiting.
// A callback that lost a race with a round started meanwhile finds busy set,
// or no next round, or a bound still ahead (then it waits again).
func (v *verifier) due() {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.busy || v.stopped || v.next == nil {
		return
	}
	v.scheduleLocked()
}

// stop refuses new rounds (callers waiting for the next one get
// ErrClosed) and waits for the round in flight.
func (v *verifier) stop() {
	v.mu.Lock()
	v.stopped = true
	if v.timer != nil {
		v.timer.Stop()
	}
	if r := v.next; r != nil && !v.busy {
		v.next = nil
		r.err = ErrClosed
		close(r.done)
	}
	v.mu.Unlock()
	v.inflight.Wait()
}

func (v *verifier) startLocked() {
	r := v.next
	v.next = nil
	v.busy = true
	if v.timer != nil {
		v.timer.Stop()
	}
	v.rounds.Add(1)
	v.wg.Add(1)
	v.inflight.Add(1)
	go func() {
		defer v.wg.Done()
		defer v.inflight.Done()
		r.err = v.verify()
		close(r.done)
		v.mu.Lock()
		v.busy = false
		if v.next != nil {
			if v.stopped {
				v.next.err = ErrClosed
				close(v.next.done)
				v.next = nil
			} else {
				v.scheduleLocked()
			}
		}
		v.mu.Unlock()
	}()
}
