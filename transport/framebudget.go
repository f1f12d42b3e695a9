package transport

import "sync"

// frameBudget bounds the RPC frame bytes that all inbound connections hold
// together (Inbound.MaxFrameBytes): requests being read, counted as their
// buffers grow, and requests their handlers hold. A connection's reader
// waits for room (TCP backpressure on its peer). Safe for concurrent use.
type frameBudget struct {
	max int

	mu      sync.Mutex
	held    int
	waiters int
	freed   chan struct{} // closed (and replaced) when bytes are released while someone waits
}

func newFrameBudget(max int) *frameBudget {
	return &frameBudget{max: max, freed: make(chan struct{})}
}

// acquire waits until n more bytes fit, or until connDone or closing is
// closed (false, nothing held). n is at most max (a connection never holds
// more than MaxFrameBytesPerConn, which Validate keeps within
// MaxFrameBytes).
func (b *frameBudget) acquire(n int, connDone, closing <-chan struct{}) bool {
	b.mu.Lock()
	for b.held+n > b.max {
		ch := b.freed
		b.waiters++
		b.mu.Unlock()
		var ok bool
		select {
		case <-ch:
			ok = true
		case <-connDone:
		case <-closing:
		}
		b.mu.Lock()
		b.waiters--
		if !ok {
			b.mu.Unlock()
			return false
		}
	}
	b.held += n
	b.mu.Unlock()
	return true
}

// release returns n bytes and wakes the waiters.
func (b *frameBudget) release(n int) {
	b.mu.Lock()
	b.held -= n
	if b.waiters > 0 {
		close(b.freed)
		b.freed = make(chan struct{})
	}
	b.mu.Unlock()
}

// inUse is the number of bytes held now.
func (b *frameBudget) inUse() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.held
}
