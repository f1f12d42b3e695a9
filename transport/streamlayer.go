package transport

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

var _ raft.StreamLayer = (*streamLayer)(nil)

// StreamLayer returns the raft.StreamLayer of this Transport, for
// raft.NewNetworkTransportWithConfig. Most callers want RaftTransport,
// which builds the NetworkTransport with this Config's pool and timeouts.
//
// Accept returns the inbound connections whose preface selected Raft; Dial
// opens an outbound one (TLS when configured) bounded by the timeout; Addr
// is the advertise address. Close stops accepting Raft connections and
// closes every Raft connection, accepted or dialed, so no Raft read stays
// blocked; RPCs keep working until Transport.Close.
func (t *Transport) streamLayer() raft.StreamLayer { return t.stream }

// streamLayer implements raft.StreamLayer over the Transport.
type streamLayer struct {
	t        *Transport
	acceptCh chan net.Conn
	closed   chan struct{}
	once     sync.Once
	// open counts the accepted connections their user has not closed yet;
	// idle is closed (and cleared) when it drops to zero. See
	// Transport.WaitRaftConns.
	mu   sync.Mutex
	open int
	idle chan struct{}
}

func newStreamLayer(t *Transport) *streamLayer {
	return &streamLayer{t: t, acceptCh: make(chan net.Conn), closed: make(chan struct{})}
}

// Accept waits for the next inbound Raft connection. After Close it returns
// an error wrapping ErrClosed and net.ErrClosed.
func (s *streamLayer) Accept() (net.Conn, error) {
	select {
	case c := <-s.acceptCh:
		return c, nil
	case <-s.closed:
		return nil, fmt.Errorf("%w: %w", ErrClosed, net.ErrClosed)
	}
}

// Close stops accepting and closes every Raft connection. Idempotent.
func (s *streamLayer) Close() error {
	s.once.Do(func() {
		close(s.closed)
		s.t.closeKind(connRaft)
	})
	return nil
}

// isClosed reports whether the stream layer or the Transport was closed.
func (s *streamLayer) isClosed() bool {
	select {
	case <-s.closed:
		return true
	default:
		return s.t.isClosed()
	}
}

// Addr returns the advertise address.
func (s *streamLayer) Addr() net.Addr { return advertiseAddr(s.t.advertise) }

// Dial opens a Raft connection to address within timeout (no limit when
// timeout <= 0, other than Close).
func (s *streamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	select {
	case <-s.closed:
		return nil, ErrClosed
	default:
	}
	ctx := context.Background()
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	sess, err := s.t.dialConn(ctx, string(address), protoRaft, dialAuto)
	if err != nil {
		return nil, err
	}
	return s.t.newOutboundRaftConn(sess), nil
}

// deliver hands an inbound Raft connection to Accept. A connection nobody
// accepts within HandshakeTimeout (no NetworkTransport running) is closed.
func (s *streamLayer) deliver(c *raftConn) {
	raw := c.raw
	timer := time.NewTimer(s.t.cfg.Inbound.HandshakeTimeout)
	defer timer.Stop()
	s.accepted(1)
	select {
	case s.acceptCh <- c:
		s.t.metrics.accepted.WithLabelValues("raft").Inc()
		return
	case <-s.closed:
		s.t.reject(raw, rejectClosing, ErrClosed)
	case <-timer.C:
		s.t.reject(raw, rejectNotAccepted, fmt.Errorf("no raft transport accepted the connection within %v", s.t.cfg.Inbound.HandshakeTimeout))
	}
	s.accepted(-1)
}

// accepted adds d to the count of open accepted connections.
func (s *streamLayer) accepted(d int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.open += d
	if s.open == 0 && s.idle != nil {
		close(s.idle)
		s.idle = nil
	}
}

// WaitRaftConns waits until every Raft connection that Accept returned has
// been closed by its user, or ctx ends (then it returns ctx.Err()).
//
// raft.NetworkTransport serves each accepted connection on a goroutine that
// may still be running a request — a heartbeat writes the term to raft's
// stable store — after Raft shut down and the connection broke; it closes
// the connection when it returns. Call WaitRaftConns after Close and
// before closing the stores Raft writes to.
func (t *Transport) WaitRaftConns(ctx context.Context) error {
	s := t.stream
	for {
		s.mu.Lock()
		if s.open == 0 {
			s.mu.Unlock()
			return nil
		}
		if s.idle == nil {
			s.idle = make(chan struct{})
		}
		idle := s.idle
		s.mu.Unlock()
		select {
		case <-idle:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
