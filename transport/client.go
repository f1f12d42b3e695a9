package transport

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// Call sends req to the Transport listening at addr and returns its
// handler's response. It is safe for concurrent use; concurrent calls to
// one address are multiplexed over at most RPCConnsPerPeer pooled
// connections, dialed on demand and re-dialed after a failure (e.g. the
// peer restarted).
//
// ctx bounds the whole call, dial included: when it ends, Call returns at
// once with an error wrapping ctx.Err() and tells the peer to cancel the
// handler. ctx's deadline is sent along, so the handler's context expires
// at the same time (give or take the network delay).
//
// Errors wrap: ctx.Err(); ErrRemote (the handler failed; the text is its
// message) possibly with errNoHandler or errTooLarge; errConnectionLost
// (the connection broke after the request may have been sent: the handler
// may or may not have run); errHandshake; errTooLarge (req exceeds
// MaxMessageSize); ErrClosed; or a dial error. Call does not keep req
// after it returns; the caller owns the response.
func (t *Transport) Call(ctx context.Context, addr string, req []byte) ([]byte, error) {
	start := time.Now()
	resp, outcome, err := t.call(ctx, addr, req)
	t.metrics.calls.WithLabelValues(outcome).Inc()
	if outcome == outcomeOK || outcome == outcomeRemote {
		t.metrics.callLatency.Observe(time.Since(start).Seconds())
	}
	return resp, err
}

// maxUnsentRetries bounds how often a call moves to a fresh connection
// after its connection failed before the request was written.
const maxUnsentRetries = 3

func (t *Transport) call(ctx context.Context, addr string, req []byte) ([]byte, string, error) {
	if len(req) > t.cfg.MaxMessageSize {
		return nil, outcomeTooLarge, fmt.Errorf("%w: request of %d bytes exceeds %d", errTooLarge, len(req), t.cfg.MaxMessageSize)
	}
	for attempt := 0; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return nil, ctxOutcome(err), fmt.Errorf("transport: call %s: %w", addr, err)
		}
		c, err := t.pooledConn(ctx, addr)
		if err != nil {
			switch {
			case errors.Is(err, ErrClosed):
				return nil, outcomeClosed, err
			case ctx.Err() != nil:
				return nil, ctxOutcome(ctx.Err()), fmt.Errorf("transport: call %s: %w", addr, ctx.Err())
			}
			return nil, outcomeDial, err
		}
		r := c.roundTrip(ctx, req)
		if r.err != nil {
			if err := ctxDone(ctx); err != nil {
				// The handler's context carries the caller's deadline, so a
				// remote failure at the deadline is reported as the deadline.
				r.err = err
			}
		}
		switch {
		case r.unsent && attempt < maxUnsentRetries && retryable(r.err):
			continue
		case r.err == nil:
			return r.payload, outcomeOK, nil
		case errors.Is(r.err, ErrRemote):
			return nil, outcomeRemote, r.err
		case errors.Is(r.err, context.Canceled), errors.Is(r.err, context.DeadlineExceeded):
			return nil, ctxOutcome(r.err), fmt.Errorf("transport: call %s: %w", addr, r.err)
		case t.isClosed():
			return nil, outcomeClosed, fmt.Errorf("%w (call %s: %v)", ErrClosed, addr, r.err)
		default:
			return nil, outcomeConnLost, fmt.Errorf("transport: call %s: %w", addr, r.err)
		}
	}
}

// retryable reports whether an unsent call may move to a fresh connection:
// not when the peer refused us (it would refuse again).
func retryable(err error) bool {
	return !errors.Is(err, errHandshake) && !errors.Is(err, errProtocol) && !errors.Is(err, errRefused)
}

// ctxDone is ctx.Err(), or DeadlineExceeded once ctx's deadline has passed
// even if its timer has not fired yet.
func ctxDone(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		return context.DeadlineExceeded
	}
	return nil
}

func ctxOutcome(err error) string {
	if errors.Is(err, context.DeadlineExceeded) {
		return outcomeDeadline
	}
	return outcomeCanceled
}

// clientConn is the client side of an RPC connection.
type clientConn struct {
	*muxConn
	addr   string
	nextID atomic.Uint64
	used   atomic.Bool // a call started since the last keepalive tick

	mu      sync.Mutex
	pending map[uint64]chan callResult // nil once failed
}

// callResult is the outcome of one round trip.
type callResult struct {
	payload []byte
	err     error
	unsent  bool // the request never reached the connection: safe to retry
}

// dialClient dials addr and starts the connection's reader and writer. It
// pings at the peer's keepalive interval if that is shorter than ours
// (announced in its hello).
func (t *Transport) dialClient(ctx context.Context, addr string) (*clientConn, error) {
	s, err := t.dialConn(ctx, addr, protoRPC, dialAuto)
	if err != nil {
		return nil, err
	}
	interval := t.cfg.KeepaliveInterval
	if s.peer.idle > 0 {
		interval = max(min(interval, s.peer.idle/deadAfter), minKeepalive)
	}
	c := &clientConn{
		muxConn: newMuxConn(t, s.raw, s.conn, true, interval),
		addr:    addr,
		pending: make(map[uint64]chan callResult),
	}
	c.idleTicks = max(1, int((t.cfg.RPCIdleTimeout+interval-1)/interval))
	c.busy = c.inUse
	c.onFail = func(err error) {
		t.dropConn(c)
		c.failPending(err)
	}
	if !t.goTracked(c.writeLoop) {
		c.fail(ErrClosed)
		return nil, ErrClosed
	}
	if !t.goTracked(c.readLoop) {
		c.fail(ErrClosed)
		return nil, ErrClosed
	}
	return c, nil
}

// inUse reports whether a call started since the last call of inUse or
// is still pending (the idle check of the keepalive ticks).
func (c *clientConn) inUse() bool {
	if c.used.Swap(false) {
		return true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.pending) > 0
}

// roundTrip sends one request and waits for its response or for ctx.
func (c *clientConn) roundTrip(ctx context.Context, req []byte) callResult {
	c.used.Store(true)
	id := c.nextID.Add(1)
	ch := make(chan callResult, 1)
	c.mu.Lock()
	if c.pending == nil {
		c.mu.Unlock()
		return callResult{err: c.err, unsent: true}
	}
	c.pending[id] = ch
	c.mu.Unlock()

	var aux uint64
	if dl, ok := ctx.Deadline(); ok {
		rem := time.Until(dl)
		if rem <= 0 {
			c.forget(id)
			return callResult{err: context.DeadlineExceeded}
		}
		aux = uint64(min(rem, maxDeadlineNanos))
	}
	f := newFrame(kindRequest, 0, id, aux, req)
	if tried, ok := c.writeDirect(f, ctx); tried && !ok {
		// Part of the frame may have reached the peer: not unsent.
		c.forget(id)
		if err := ctx.Err(); err != nil {
			return callResult{err: err}
		}
		return callResult{err: c.err}
	} else if !tried && !c.send(f, ctx.Done()) {
		c.forget(id)
		if err := ctx.Err(); err != nil {
			return callResult{err: err}
		}
		return callResult{err: c.err, unsent: true}
	}
	select {
	case r := <-ch:
		return r
	case <-ctx.Done():
		if c.forget(id) {
			c.trySend(newFrame(kindCancel, 0, id, 0, nil))
		}
		return callResult{err: ctx.Err()}
	}
}

// forget removes a pending call; it reports whether it was still pending.
func (c *clientConn) forget(id uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.pending[id]; !ok {
		return false
	}
	delete(c.pending, id)
	return true
}

// deliver completes a pending call; results for forgotten calls are dropped.
func (c *clientConn) deliver(id uint64, r callResult) {
	c.mu.Lock()
	ch, ok := c.pending[id]
	delete(c.pending, id)
	c.mu.Unlock()
	if ok {
		ch <- r
	}
}

// failPending fails every pending call after the connection failed. Calls
// whose request frames were still queued are marked unsent.
func (c *clientConn) failPending(err error) {
	unsent := make(map[uint64]bool)
drain:
	for {
		select {
		case f := <-c.sendq:
			if h, herr := parseHeader(f[:headerLen], maxFrameLen); herr == nil && h.kind == kindRequest {
				unsent[h.id] = true
			}
		default:
			break drain
		}
	}
	c.mu.Lock()
	pending := c.pending
	c.pending = nil
	c.mu.Unlock()
	for id, ch := range pending {
		ch <- callResult{err: err, unsent: unsent[id]}
	}
}

// readLoop reads responses and completes pending calls until the
// connection fails.
func (c *clientConn) readLoop() {
	br := bufio.NewReaderSize(c.conn, ioBufSize)
	var hdr [headerLen]byte
	for {
		h, payload, err := readFrame(br, &hdr, c.t.cfg.MaxMessageSize)
		if err != nil {
			c.fail(c.readError(err))
			return
		}
		c.touch()
		switch h.kind {
		case kindResponse:
			c.deliver(h.id, callResult{payload: payload})
		case kindError:
			c.deliver(h.id, callResult{err: remoteError(h.code, payload)})
		case kindPong:
		default:
			c.fail(fmt.Errorf("%w: unexpected frame kind %d from %s", errProtocol, h.kind, c.addr))
			return
		}
	}
}

// readError turns a read failure into the error pending calls get.
func (c *clientConn) readError(err error) error {
	if errors.Is(err, errProtocol) || errors.Is(err, errTooLarge) {
		c.t.metrics.protocol.Inc()
		c.t.log.Debug("transport: closed RPC connection: protocol violation", "remote", c.addr, "err", err)
		return fmt.Errorf("%w from %s", err, c.addr)
	}
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("%w: %s: %v", errConnectionLost, c.addr, err)
}

// remoteError builds the caller's error for an error frame.
func remoteError(code byte, msg []byte) error {
	switch code {
	case codeNoHandler:
		return fmt.Errorf("%w: %w", ErrRemote, errNoHandler)
	case codeTooLarge:
		return fmt.Errorf("%w: response: %w: %s", ErrRemote, errTooLarge, printable(msg))
	default:
		return fmt.Errorf("%w: %s", ErrRemote, printable(msg))
	}
}
