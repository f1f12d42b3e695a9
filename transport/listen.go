package transport

import (
	"crypto/tls"
	"encoding/binary"
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
		switch reason := t.admitInbound(raw); reason {
		case "":
		case rejectClosing:
			raw.Close()
			return
		default:
			// Over a limit: close before reading or allocating anything.
			raw.Close()
			t.limitReached(raw, reason)
			continue
		}
		if !t.goTracked(func() { t.handshake(raw) }) {
			raw.Close()
			t.untrack(raw)
			return
		}
	}
}

// handshake runs the server side of the connection set-up: the first
// message (the first TLS record, or without TLS the preface) within
// Inbound.FirstByteTimeout, and everything — TLS (when configured), the
// preface and, for version 2, the hello — within Inbound.HandshakeTimeout.
// It then hands the connection to the Raft stream layer or serves RPCs on
// it. Any failure closes the connection, counts it and logs it at debug
// level (identity refusals at Warn, see refuse).
func (t *Transport) handshake(raw net.Conn) {
	start := time.Now()
	raw.SetDeadline(start.Add(t.cfg.Inbound.FirstByteTimeout))
	conn := raw
	if t.serverTLS != nil {
		first, reason, err := readFirstRecord(raw)
		if err != nil {
			t.reject(raw, reason, err)
			return
		}
		raw.SetDeadline(start.Add(t.cfg.Inbound.HandshakeTimeout))
		tc := tls.Server(&prefixConn{Conn: raw, prefix: first}, t.serverTLS)
		if err := tc.HandshakeContext(t.ctx); err != nil {
			reason := rejectTLS
			if errors.Is(err, os.ErrDeadlineExceeded) {
				reason = rejectTimeout
			}
			t.reject(raw, reason, err)
			return
		}
		t.handshakeSucceeded(raw)
		conn = tc
	}
	var b [prefaceLen]byte
	if _, err := io.ReadFull(conn, b[:]); err != nil {
		t.reject(raw, readFailure(err), err)
		return
	}
	if t.serverTLS == nil {
		raw.SetDeadline(start.Add(t.cfg.Inbound.HandshakeTimeout))
	}
	proto, version, err := parsePreface(b, t.prefacePolicy())
	if err != nil {
		var pe *prefaceError
		errors.As(err, &pe)
		var farewell []byte
		if pe.reason == rejectBadVersion || pe.reason == rejectLegacy {
			// Tell the dialer why, in the frame format every version keeps.
			farewell = newFrame(kindError, codeVersion, 0, 0, []byte(pe.msg))
		}
		if pe.reason == rejectLegacy {
			t.refuse(raw.RemoteAddr().String(), true, false, Identity{}, pe.msg)
		}
		t.rejectWith(raw, conn, pe.reason, err, farewell)
		return
	}
	if _, err := conn.Write(b[:]); err != nil {
		t.reject(raw, readFailure(err), err)
		return
	}
	peer := Peer{Certificates: verifiedChain(conn)}
	if version == versionHello {
		id, reason, farewell, err := t.serverHello(conn, raw.RemoteAddr().String(), proto)
		if err != nil {
			t.rejectWith(raw, conn, reason, err, farewell)
			return
		}
		peer.Identity = id
	}
	if err := raw.SetDeadline(time.Time{}); err != nil {
		t.reject(raw, rejectRead, err)
		return
	}
	switch proto {
	case protoRaft:
		t.setKind(raw, connRaft)
		t.stream.deliver(newInboundRaftConn(t, raw, conn, version))
	case protoRPC:
		t.setKind(raw, connRPC)
		t.metrics.accepted.WithLabelValues("rpc").Inc()
		t.serveConn(raw, conn, peer)
	}
}

// prefacePolicy is the versions this listener admits now.
func (t *Transport) prefacePolicy() prefacePolicy {
	if t.cfg.legacyV1 {
		return prefacePolicy{legacy: true}
	}
	return prefacePolicy{hello: true, legacy: t.cfg.Identity == nil || t.acceptLegacy()}
}

// acceptLegacy reports whether legacy (version 1) peers are admitted now.
func (t *Transport) acceptLegacy() bool {
	return t.cfg.AcceptLegacy != nil && t.cfg.AcceptLegacy()
}

// serverHello runs the listener's side of the hello (hello.go): read the
// dialer's hello, vet it, answer with this node's hello or a refusal, and
// wait for the dialer's verdict. It returns the dialer's identity; on
// failure the metric reason and, for a refusal, the message to send before
// closing.
func (t *Transport) serverHello(conn net.Conn, remote string, proto byte) (Identity, string, []byte, error) {
	typ, body, err := readMsg(conn)
	if err != nil {
		if errors.Is(err, errProtocol) {
			return Identity{}, rejectHello, nil, err
		}
		return Identity{}, readFailure(err), nil, err
	}
	if typ != msgHello {
		return Identity{}, rejectHello, nil, fmt.Errorf("%w: %w: expected a hello, got message type %d", errProtocol, errHelloFormat, typ)
	}
	peer, err := decodeHello(body)
	if err != nil {
		return Identity{}, rejectHello, nil, err
	}
	own, err := t.ownHello(proto)
	if err == nil {
		err = t.checkPeer(peer.id, true)
	} else {
		t.log.Error("transport: cannot send this node's identity", "err", err)
	}
	if err != nil {
		reason := truncate(err.Error(), maxReasonLen)
		t.refuse(remote, true, false, peer.id, reason)
		return Identity{}, rejectIdentity, encodeRefuse(reason), fmt.Errorf("refused peer %q: %w", peer.id.NodeID, err)
	}
	if _, err := conn.Write(encodeHello(own)); err != nil {
		return Identity{}, readFailure(err), nil, err
	}
	typ, body, err = readMsg(conn)
	switch {
	case err != nil && errors.Is(err, errProtocol):
		return Identity{}, rejectHello, nil, err
	case err != nil:
		return Identity{}, readFailure(err), nil, err
	case typ == msgRefuse:
		reason := printable(body)
		t.refuse(remote, true, true, peer.id, reason)
		return Identity{}, rejectRefusedByPeer, nil, fmt.Errorf("%w: %s", errRefused, reason)
	case typ != msgAccept:
		return Identity{}, rejectHello, nil, fmt.Errorf("%w: %w: expected accept or refuse, got message type %d", errProtocol, errHelloFormat, typ)
	}
	return peer.id, "", nil, nil
}

// ownHello is the hello this node sends on a connection of proto.
func (t *Transport) ownHello(proto byte) (hello, error) {
	var h hello
	if t.cfg.Identity != nil {
		h.id = t.cfg.Identity()
	}
	if err := checkIdentity(h.id); err != nil {
		return hello{}, fmt.Errorf("transport: Identity: %w", err)
	}
	h.idle = deadAfter * t.cfg.KeepaliveInterval
	if proto == protoRaft {
		h.idle = t.cfg.RaftIdleTimeout
	}
	return h, nil
}

// checkPeer runs Config.CheckPeer, if any.
func (t *Transport) checkPeer(peer Identity, inbound bool) error {
	if t.cfg.CheckPeer == nil {
		return nil
	}
	return t.cfg.CheckPeer(peer, inbound)
}

// limitReached counts and (rate-limited) logs a connection refused over a
// limit.
func (t *Transport) limitReached(raw net.Conn, reason string) {
	t.metrics.rejected.WithLabelValues(reason).Inc()
	if t.cfg.testHookReject != nil {
		t.cfg.testHookReject(reason)
	}
	if ok, suppressed := t.limitLog.allow(reason); ok {
		t.log.Warn("transport: refusing inbound connections: limit reached",
			"reason", reason, "remote", raw.RemoteAddr().String(), "refused_since_last_log", suppressed,
			"max_conns", t.cfg.Inbound.MaxConns, "max_conns_per_host", t.cfg.Inbound.MaxConnsPerHost,
			"max_handshakes", t.cfg.Inbound.MaxHandshakes, "max_handshakes_per_host", t.cfg.Inbound.MaxHandshakesPerHost)
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
	t.rejectWith(raw, nil, reason, err, nil)
}

// rejectWith is reject that first tells the peer why: it writes farewell
// (a version error frame or a hello refusal) to conn, after the refusal was
// counted and recorded, so the peer never learns of it before this node's
// metrics and Refusals do.
func (t *Transport) rejectWith(raw, conn net.Conn, reason string, err error, farewell []byte) {
	if t.isClosed() {
		reason = rejectClosing
	}
	t.metrics.rejected.WithLabelValues(reason).Inc()
	if t.cfg.testHookReject != nil {
		t.cfg.testHookReject(reason)
	}
	t.log.Debug("transport: refused connection", "remote", raw.RemoteAddr().String(), "reason", reason, "err", err)
	if !chargedFailure(reason) {
		t.handshakeSucceeded(raw) // a refusal, not a failure: refund its charge
	}
	if len(farewell) > 0 {
		conn.Write(farewell)
	}
	raw.Close()
	t.untrack(raw)
}

// maxFirstRecord bounds the first TLS record a listener reads before the
// TLS handshake starts: a record's plaintext is at most 16 KiB, and a
// ClientHello fits in one.
const maxFirstRecord = 1 << 14

// readFirstRecord reads the first TLS record of an accepted connection —
// its 5-byte header (content type, version, length) and body — and returns
// it for replay into the TLS handshake, or the metric reason and error
// for a connection that is not TLS, or that failed to send it.
func readFirstRecord(r io.Reader) ([]byte, string, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:1]); err != nil {
		return nil, readFailure(err), err
	}
	if hdr[0] != tlsHandshakeRecord {
		// Refuse a plaintext peer at once instead of waiting for a TLS
		// record header that will never come.
		return nil, rejectTLS, fmt.Errorf("plaintext connection (first byte 0x%02x) to a TLS listener", hdr[0])
	}
	if _, err := io.ReadFull(r, hdr[1:]); err != nil {
		return nil, readFailure(err), err
	}
	n := int(binary.BigEndian.Uint16(hdr[3:5]))
	if hdr[1] != 3 || n == 0 || n > maxFirstRecord {
		return nil, rejectTLS, fmt.Errorf("not a TLS handshake record (version %d.%d, %d bytes)", hdr[1], hdr[2], n)
	}
	rec := make([]byte, len(hdr)+n)
	copy(rec, hdr[:])
	if _, err := io.ReadFull(r, rec[len(hdr):]); err != nil {
		return nil, readFailure(err), err
	}
	return rec, "", nil
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
