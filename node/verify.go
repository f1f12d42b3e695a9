package node

import (
	"context"
	"sync"
)

// verifier batches leadership confirmations: one VerifyLeader round is in
// flight at a time, and a round serves every caller that arrived before it
// started. A caller that arrives while a round is in flight waits for the
// next one — the running round may have started before the caller's request
// was received, so it cannot vouch for it.
//
// stop must run before Raft shuts down: hashicorp/raft (v1.7.3) never
// answers a VerifyLeader request still queued when it shuts down (that
// future has no shutdown channel), so a round in flight then would block
// for ever, and Close with it. stop refuses new rounds and waits for the
// one in flight, which a running Raft answers (confirmed, or leadership
// lost within the leader lease timeout).
type verifier struct {
	verify func() error // one round (raft.VerifyLeader().Error())
	wg     *sync.WaitGroup

	mu       sync.Mutex
	busy     bool
	stopped  bool
	next     *round
	inflight sync.WaitGroup
}

type round struct {
	done chan struct{}
	err  error
}

// confirm returns nil once a round that started after the call confirmed
// leadership, the round's error, or ctx's error; ErrClosed once stopped.
func (v *verifier) confirm(ctx context.Context) error {
	v.mu.Lock()
	if v.stopped {
		v.mu.Unlock()
		return ErrClosed
	}
	if v.next == nil {
		v.next = &round{done: make(chan struct{})}
	}
	r := v.next
	if !v.busy {
		v.startLocked()
	}
	v.mu.Unlock()
	select {
	case <-r.done:
		return r.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// stop refuses new rounds (callers waiting for the next one get
// ErrClosed) and waits for the round in flight.
func (v *verifier) stop() {
	v.mu.Lock()
	v.stopped = true
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
				v.startLocked()
			}
		}
		v.mu.Unlock()
	}()
}
