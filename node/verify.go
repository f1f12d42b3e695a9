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
type verifier struct {
	verify func() error // one round (raft.VerifyLeader().Error())
	wg     *sync.WaitGroup

	mu   sync.Mutex
	busy bool
	next *round
}

type round struct {
	done chan struct{}
	err  error
}

// confirm returns nil once a round that started after the call confirmed
// leadership, the round's error, or ctx's error.
func (v *verifier) confirm(ctx context.Context) error {
	v.mu.Lock()
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

func (v *verifier) startLocked() {
	r := v.next
	v.next = nil
	v.busy = true
	v.wg.Add(1)
	go func() {
		defer v.wg.Done()
		r.err = v.verify()
		close(r.done)
		v.mu.Lock()
		v.busy = false
		if v.next != nil {
			v.startLocked()
		}
		v.mu.Unlock()
	}()
}
