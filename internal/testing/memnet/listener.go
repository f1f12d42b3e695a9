package memnet

import (
	"net"
	"sync"
	"syscall"
)

// listener is a memnet net.Listener.
type listener struct {
	net     *Network
	host    string
	addr    Addr
	backlog chan *Conn
	done    chan struct{}

	mu     sync.Mutex
	closed bool
}

var _ net.Listener = (*listener)(nil)

// Accept waits for the next connection. After Close it returns an error
// wrapping net.ErrClosed.
func (l *listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.backlog:
		return c, nil
	case <-l.done:
		return nil, &net.OpError{Op: "accept", Net: NetworkName, Addr: l.addr, Err: net.ErrClosed}
	}
}

// Close stops listening, frees the address and resets connections that were
// queued but not accepted. Idempotent.
func (l *listener) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	close(l.done)
	l.mu.Unlock()

	l.net.mu.Lock()
	if l.net.listeners[l.addr.String()] == l {
		delete(l.net.listeners, l.addr.String())
	}
	l.net.mu.Unlock()

	for {
		select {
		case c := <-l.backlog:
			c.p.reset()
		default:
			return nil
		}
	}
}

// Addr returns the listening address.
func (l *listener) Addr() net.Addr { return l.addr }

// enqueue queues an accepted end. A full backlog refuses the connection.
func (l *listener) enqueue(c *Conn) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return syscall.ECONNREFUSED
	}
	select {
	case l.backlog <- c:
		return nil
	default:
		return syscall.ECONNREFUSED
	}
}
