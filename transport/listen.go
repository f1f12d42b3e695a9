package transport

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"
)

// acceptLoop accepts connections until the listener closes and starts a
// handshake goroutine for each.
func (t *Transport) acceptLoop() {
	const maxDelay = time.Second
	var delay time.Duration
	for {
		raw, err := t.ln.Accept()
		if err != nil {
			if t.isClosed() {
				return
			}
			if errors.Is(err, net.ErrClosed) {
				t.log.Error("transport: listener closed underneath the transport; no longer accepting", "addr", t.advertise)
				return
			}
			// Temporary failure (e.g. out of file descriptors): back off.
			delay = min(max(2*delay, 5*time.Millisecond), maxDelay)
			t.log.Warn("transport: accept failed", "err", err, "retry_in", delay)
			timer := time.NewTimer(delay)
			select {
			case <-timer.C:
			case <-t.ctx.Done():
				timer.Stop()
				return
			}
			continue
		}
		delay = 0
		if !t.track(raw, connHandshake) || !t.goTracked(func() { t.handshake(raw) }) {
			raw.Close()
			t.untrack(raw)
			return
		}
	}
}

// handshake runs the server side of the connection set-up under
// HandshakeTimeout: TLS (when configured), then the preface. It then hands
// the connection to the Raft stream layer or serves RPCs on it. Any failure
// closes the connection, counts it and logs it at debug level.
func (t *Transport) handshake(raw net.Conn) {
	raw.SetDeadline(time.Now().Add(t.cfg.HandshakeTimeout))
	conn := raw
	if t.serverTLS != nil {
		// Refuse a plaintext peer at once instead of waiting for a TLS
		// record header that will never come.
		var first [1]byte
		if _, err := io.ReadFull(raw, first[:]); err != nil {
			t.reject(raw, readFailure(err), err)
			return
		}
		if first[0] != tlsHandshakeRecord {
			t.reject(raw, rejectTLS, fmt.Errorf("plaintext connection (first byte 0x%02x) to a TLS listener", first[0]))
			return
		}
		tc := tls.Server(&prefixConn{Conn: raw, prefix: first[:]}, t.serverTLS)
		if err := tc.HandshakeContext(t.ctx); err != nil {
			reason := rejectTLS
			if errors.Is(err, os.ErrDeadlineExceeded) {
				reason = rejectTimeout
			}
			t.reject(raw, reason, err)
			return
		}
		conn = tc
	}
	var b [prefaceLen]byte
	if _, err := io.ReadFull(conn, b[:]); err != nil {
		t.reject(raw, readFailure(err), err)
		return
	}
	proto, err := parsePreface(b)
	if err != nil {
		var pe *prefaceError
		errors.As(err, &pe)
		if pe.reason == rejectBadVersion {
			// Tell the dialer why, in the frame format every version keeps.
			conn.Write(newFrame(kindError, codeVersion, 0, 0, []byte(pe.msg)))
		}
		t.reject(raw, pe.reason, err)
		return
	}
	if _, err := conn.Write(b[:]); err != nil {
		t.reject(raw, readFailure(err), err)
		return
	}
	if err := raw.SetDeadline(time.Time{}); err != nil {
		t.reject(raw, rejectRead, err)
		return
	}
	switch proto {
	case protoRaft:
		t.setKind(raw, connRaft)
		t.stream.deliver(raw, conn)
	case protoRPC:
		t.setKind(raw, connRPC)
		t.metrics.accepted.WithLabelValues("rpc").Inc()
		t.serveConn(raw, conn)
	}
}

// readFailure classifies an error reading the preface (or writing the ack).
func readFailure(err error) string {
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		return rejectTimeout
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return rejectEOF
	default:
		return rejectRead
	}
}

// reject closes a connection that failed the handshake.
func (t *Transport) reject(raw net.Conn, reason string, err error) {
	if t.isClosed() {
		reason = rejectClosing
	}
	t.metrics.rejected.WithLabelValues(reason).Inc()
	if t.cfg.testHookReject != nil {
		t.cfg.testHookReject(reason)
	}
	t.log.Debug("transport: refused connection", "remote", raw.RemoteAddr().String(), "reason", reason, "err", err)
	raw.Close()
	t.untrack(raw)
}

// tlsHandshakeRecord is the first byte of every TLS connection (a
// handshake record's content type).
const tlsHandshakeRecord = 0x16

// prefixConn replays bytes already read before reading from Conn.
type prefixConn struct {
	net.Conn
	prefix []byte
}

func (c *prefixConn) Read(b []byte) (int, error) {
	if len(c.prefix) > 0 {
		n := copy(b, c.prefix)
		c.prefix = c.prefix[n:]
		return n, nil
	}
	return c.Conn.Read(b)
}
