package transport

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime/debug"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// maxInflightPerConn bounds the handlers running for one connection; the
// connection's reader waits (backpressure) beyond it. The request bytes
// they hold are bounded by Inbound.MaxFrameBytesPerConn and, over all
// connections, Inbound.MaxFrameBytes (see serverConn.hold).
const maxInflightPerConn = 1024

// serverConn is the server side of an RPC connection.
type serverConn struct {
	*muxConn
	from   string
	peer   Peer // who dialed (PeerFromContext)
	sem    chan struct{}
	budget int           // frame bytes the connection may hold
	freed  chan struct{} // signalled when the connection releases bytes

	mu       sync.Mutex
	inflight map[uint64]context.CancelFunc
	held     int // frame bytes held: the request being read and running handlers'
}

// serveConn serves RPC frames on an accepted connection until it fails.
// It runs on the connection's handshake goroutine.
func (t *Transport) serveConn(raw, conn net.Conn, peer Peer) {
	ctx, cancel := context.WithCancel(withPeer(t.ctx, peer))
	defer cancel()
	s := &serverConn{
		muxConn:  newMuxConn(t, raw, conn, false, t.cfg.KeepaliveInterval),
		from:     raw.RemoteAddr().String(),
		peer:     peer,
		sem:      make(chan struct{}, maxInflightPerConn),
		budget:   t.cfg.Inbound.MaxFrameBytesPerConn,
		freed:    make(chan struct{}, 1),
		inflight: make(map[uint64]context.CancelFunc),
	}
	s.onFail = func(error) { cancel() }
	if !t.goTracked(s.writeLoop) {
		s.fail(ErrClosed)
		return
	}
	err := s.readLoop(ctx)
	switch {
	case errors.Is(err, errProtocol), errors.Is(err, errTooLarge):
		t.metrics.protocol.Inc()
		t.log.Debug("transport: closing RPC connection: protocol violation", "remote", s.from, "err", err)
	case !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && !t.isClosed():
		t.log.Debug("transport: RPC connection closed", "remote", s.from, "err", err)
	}
	s.fail(err)
}

// readLoop reads request, cancel and ping frames and starts a handler
// goroutine per request. It returns the error that ended the connection.
// A request's bytes are held (hold) from the moment its buffer grows until
// its handler returns.
func (s *serverConn) readLoop(ctx context.Context) error {
	t := s.t
	br := bufio.NewReaderSize(s.conn, ioBufSize)
	var hdr [headerLen]byte
	for {
		h, payload, err := readFrameWithin(br, &hdr, t.cfg.MaxMessageSize, s)
		if errors.Is(err, errBudget) && s.dead() {
			err = s.err
		}
		if err != nil {
			return err
		}
		s.touch()
		if h.kind != kindRequest && len(payload) > 0 {
			s.release(len(payload))
		}
		switch h.kind {
		case kindRequest:
			select {
			case s.sem <- struct{}{}:
			case <-s.done:
				s.release(len(payload))
				return s.err
			}
			if err := s.start(ctx, h, payload); err != nil {
				s.release(len(payload))
				<-s.sem
				return err
			}
		case kindCancel:
			s.mu.Lock()
			if c := s.inflight[h.id]; c != nil {
				c()
			}
			s.mu.Unlock()
		case kindPing:
			s.trySend(newFrame(kindPong, 0, h.id, 0, nil))
		default:
			return fmt.Errorf("%w: unexpected frame kind %d from client", errProtocol, h.kind)
		}
	}
}

// hold waits until n more frame bytes fit into the connection's budget
// and then into the transport's, or the connection fails or the transport
// closes (false, nothing held).
func (s *serverConn) hold(n int) bool {
	for {
		s.mu.Lock()
		if s.held+n <= s.budget {
			s.held += n
			s.mu.Unlock()
			break
		}
		s.mu.Unlock()
		select {
		case <-s.freed:
		case <-s.done:
			return false
		case <-s.t.ctx.Done():
			return false
		}
	}
	if !s.t.frames.acquire(n, s.done, s.t.ctx.Done()) {
		s.releaseConn(n)
		return false
	}
	return true
}

// release returns n frame bytes to the connection's and the transport's
// budgets.
func (s *serverConn) release(n int) {
	s.t.frames.release(n)
	s.releaseConn(n)
}

// releaseConn returns n frame bytes to the connection's budget.
func (s *serverConn) releaseConn(n int) {
	s.mu.Lock()
	s.held -= n
	s.mu.Unlock()
	select {
	case s.freed <- struct{}{}:
	default:
	}
}

// start registers a request and starts its handler goroutine.
func (s *serverConn) start(ctx context.Context, h header, req []byte) error {
	var cancel context.CancelFunc
	if h.aux > 0 {
		ctx, cancel = context.WithTimeout(ctx, time.Duration(h.aux))
	} else {
		ctx, cancel = context.WithCancel(ctx)
	}
	s.mu.Lock()
	_, dup := s.inflight[h.id]
	if !dup {
		s.inflight[h.id] = cancel
	}
	s.mu.Unlock()
	if dup {
		cancel()
		return fmt.Errorf("%w: duplicate call id %d", errProtocol, h.id)
	}
	if !s.t.goTracked(func() { s.handle(ctx, cancel, h.id, req) }) {
		s.mu.Lock()
		delete(s.inflight, h.id)
		s.mu.Unlock()
		cancel()
		return ErrClosed
	}
	return nil
}

// handle runs the handler for one request and queues the reply.
func (s *serverConn) handle(ctx context.Context, cancel context.CancelFunc, id uint64, req []byte) {
	n := len(req)
	defer func() {
		s.mu.Lock()
		delete(s.inflight, id)
		s.mu.Unlock()
		cancel()
		s.release(n)
		<-s.sem
	}()
	resp, code, msg := s.t.invoke(ctx, s.from, req)
	var f []byte
	switch {
	case code != 0:
		f = newFrame(kindError, code, id, 0, []byte(truncate(msg, maxErrorLen)))
	case len(resp) > s.t.cfg.MaxMessageSize:
		s.t.metrics.served.WithLabelValues(outcomeTooLarge).Inc()
		msg := fmt.Sprintf("%d bytes exceed %d", len(resp), s.t.cfg.MaxMessageSize)
		f = newFrame(kindError, codeTooLarge, id, 0, []byte(msg))
	default:
		f = newFrame(kindResponse, 0, id, 0, resp)
	}
	s.writeReply(f)
}

// invoke calls the handler, turning errors, panics and a missing handler
// into an error code and message.
func (t *Transport) invoke(ctx context.Context, from string, req []byte) (resp []byte, code byte, msg string) {
	if t.handler == nil {
		t.metrics.served.WithLabelValues(outcomeNoHandler).Inc()
		return nil, codeNoHandler, "no handler"
	}
	defer func() {
		if r := recover(); r != nil {
			t.metrics.served.WithLabelValues(outcomePanic).Inc()
			t.log.Error("transport: RPC handler panicked", "from", from, "panic", r, "stack", string(debug.Stack()))
			resp, code, msg = nil, codePanic, fmt.Sprintf("handler panicked: %v", r)
		}
	}()
	resp, err := t.handler(ctx, from, req)
	if err != nil {
		t.metrics.served.WithLabelValues(outcomeHandlerEr).Inc()
		return nil, codeHandler, err.Error()
	}
	t.metrics.served.WithLabelValues(outcomeHandlerOK).Inc()
	return resp, 0, ""
}

// truncate shortens s to at most n bytes without splitting a rune.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// printable returns peer-supplied text safe to put into errors and logs.
func printable(b []byte) string {
	return strings.ToValidUTF8(string(b), "\uFFFD")
}
