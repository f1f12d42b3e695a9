package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

// dialMode selects the preface version of a dial.
type dialMode uint8

const (
	// dialAuto: version 2 with Config.Identity (version 1 for a peer known
	// to be legacy, when AcceptLegacy allows), version 1 without.
	dialAuto dialMode = iota
	// dialProbe: version 2 only (Probe needs the peer's hello).
	dialProbe
)

// session is a connection that completed its set-up.
type session struct {
	raw     net.Conn // tracked, for Close
	conn    net.Conn // raw, or the TLS connection over it
	version byte
	peer    hello // the peer's hello; zero for version 1
}

// dialConn opens a connection to addr for proto: dial, TLS handshake when
// configured, preface and, for version 2, the hello. The whole set-up is
// bounded by ctx and by Close. A version-2 dial that a legacy peer refuses
// is repeated with version 1 when AcceptLegacy allows it.
func (t *Transport) dialConn(ctx context.Context, addr string, proto byte, mode dialMode) (*session, error) {
	version := t.dialVersion(addr, mode)
	s, err := t.dialOnce(ctx, addr, proto, version)
	var vr *versionRefusedError
	if err != nil && version == versionHello && mode == dialAuto && errors.As(err, &vr) && t.acceptLegacy() {
		t.legacy.remember(addr)
		t.log.Info("transport: peer refused version 2; using version 1 (previous release) for a while", "addr", addr, "reason", vr.msg)
		return t.dialOnce(ctx, addr, proto, versionLegacy)
	}
	return s, err
}

// dialVersion is the preface version to dial addr with.
func (t *Transport) dialVersion(addr string, mode dialMode) byte {
	switch {
	case mode == dialProbe:
		return versionHello
	case t.cfg.legacyV1 || t.cfg.Identity == nil:
		return versionLegacy
	case t.legacy.known(addr) && t.acceptLegacy():
		return versionLegacy
	}
	return versionHello
}

// dialOnce dials addr once and sets the connection up with version.
func (t *Transport) dialOnce(ctx context.Context, addr string, proto, version byte) (*session, error) {
	if t.isClosed() {
		return nil, ErrClosed
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stopOnClose := context.AfterFunc(t.ctx, cancel)
	defer stopOnClose()

	raw, err := t.cfg.Dialer(ctx, addr)
	if err != nil {
		if t.isClosed() {
			return nil, ErrClosed
		}
		return nil, fmt.Errorf("transport: dial %s: %w", addr, err)
	}
	kind := connRPC
	if proto == protoRaft {
		kind = connRaft
	}
	if !t.track(raw, kind) {
		raw.Close()
		return nil, ErrClosed
	}
	s, err := t.setUp(ctx, raw, addr, proto, version)
	if err != nil {
		raw.Close()
		t.untrack(raw)
		switch {
		case t.isClosed():
			return nil, ErrClosed
		case ctx.Err() != nil:
			return nil, fmt.Errorf("transport: dial %s: %w", addr, ctx.Err())
		}
		return nil, err
	}
	return s, nil
}

// setUp runs the client side of the handshake on a fresh connection: TLS
// when configured, the preface and its answer, the hello for version 2,
// all bounded by ctx (its deadline, and an immediate deadline when it is
// cancelled).
func (t *Transport) setUp(ctx context.Context, raw net.Conn, addr string, proto, version byte) (*session, error) {
	if dl, ok := ctx.Deadline(); ok {
		raw.SetDeadline(dl)
	}
	interrupt := context.AfterFunc(ctx, func() { raw.SetDeadline(time.Unix(1, 0)) })
	defer interrupt()
	s := &session{raw: raw, conn: raw, version: version}
	if t.cfg.TLS != nil {
		tc := tls.Client(raw, clientTLS(t.cfg.TLS, addr))
		if err := tc.HandshakeContext(ctx); err != nil {
			return nil, fmt.Errorf("%w: TLS with %s: %v", errHandshake, addr, err)
		}
		s.conn = tc
	}
	if _, err := s.conn.Write(preface(proto, version)); err != nil {
		return nil, fmt.Errorf("%w: preface to %s: %v", errHandshake, addr, err)
	}
	if err := readAck(s.conn, proto, version); err != nil {
		return nil, fmt.Errorf("%w (%s)", err, addr)
	}
	if version == versionHello {
		peer, err := t.clientHello(s.conn, addr, proto)
		if err != nil {
			return nil, err
		}
		s.peer = peer
	}
	if !interrupt() {
		// ctx ended meanwhile; the interrupt may have poisoned the deadline.
		return nil, ctx.Err()
	}
	if err := raw.SetDeadline(time.Time{}); err != nil {
		return nil, fmt.Errorf("transport: dial %s: %w", addr, err)
	}
	return s, nil
}

// peerRefusedError is this node refusing the peer it dialed (CheckPeer
// failed); it wraps errHandshake and CheckPeer's error.
type peerRefusedError struct {
	addr string
	peer Identity
	err  error
}

func (e *peerRefusedError) Error() string {
	return fmt.Sprintf("%v: refused peer %s (node %q, cluster %q): %v", errHandshake, e.addr, e.peer.NodeID, e.peer.ClusterID, e.err)
}

func (e *peerRefusedError) Unwrap() []error { return []error{errHandshake, e.err} }

// clientHello runs the dialer's side of the hello (hello.go).
func (t *Transport) clientHello(conn net.Conn, addr string, proto byte) (hello, error) {
	own, err := t.ownHello(proto)
	if err != nil {
		return hello{}, err
	}
	if _, err := conn.Write(encodeHello(own)); err != nil {
		return hello{}, fmt.Errorf("%w: hello to %s: %v", errHandshake, addr, err)
	}
	typ, body, err := readMsg(conn)
	if err != nil {
		if errors.Is(err, errProtocol) {
			return hello{}, fmt.Errorf("%w (%s)", err, addr)
		}
		return hello{}, fmt.Errorf("%w: reading the hello of %s: %v", errHandshake, addr, err)
	}
	switch typ {
	case msgRefuse:
		reason := printable(body)
		t.refuse(addr, false, true, Identity{}, reason)
		return hello{}, fmt.Errorf("%w: %s: %s", errRefused, addr, reason)
	case msgHello:
	default:
		return hello{}, fmt.Errorf("%w: %w: expected a hello from %s, got message type %d", errProtocol, errHelloFormat, addr, typ)
	}
	peer, err := decodeHello(body)
	if err != nil {
		return hello{}, fmt.Errorf("%w (%s)", err, addr)
	}
	if err := t.checkPeer(peer.id, false); err != nil {
		reason := truncate(err.Error(), maxReasonLen)
		t.refuse(addr, false, false, peer.id, reason)
		conn.Write(encodeRefuse(reason))
		return hello{}, &peerRefusedError{addr: addr, peer: peer.id, err: err}
	}
	if _, err := conn.Write(encodeMsg(msgAccept, nil)); err != nil {
		return hello{}, fmt.Errorf("%w: hello to %s: %v", errHandshake, addr, err)
	}
	return peer, nil
}

// versionRefusedError is a listener's codeVersion answer to the preface:
// it does not speak (or does not admit) the dialed version.
type versionRefusedError struct{ msg string }

func (e *versionRefusedError) Error() string {
	return fmt.Sprintf("%v: peer refused the connection: %s", errProtocol, e.msg)
}

func (e *versionRefusedError) Unwrap() error { return errProtocol }

// readAck reads the listener's answer to the preface (see handshake.go).
func readAck(conn net.Conn, proto, version byte) error {
	var b [headerLen]byte
	if _, err := io.ReadFull(conn, b[:1]); err != nil {
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "remote error" {
			return fmt.Errorf("%w: peer refused the TLS session: %v", errHandshake, err)
		}
		return fmt.Errorf("%w: peer closed the connection instead of accepting the preface: %v", errHandshake, err)
	}
	switch b[0] {
	case proto:
		if _, err := io.ReadFull(conn, b[1:2]); err != nil {
			return fmt.Errorf("%w: reading preface answer: %v", errHandshake, err)
		}
		if b[1] != version {
			return fmt.Errorf("%w: peer answered version %d to version %d", errProtocol, b[1], version)
		}
		return nil
	case kindError:
		if _, err := io.ReadFull(conn, b[1:]); err != nil {
			return fmt.Errorf("%w: reading refusal: %v", errHandshake, err)
		}
		h, err := parseHeader(b[:], 0)
		if err != nil {
			return fmt.Errorf("%w: malformed refusal: %v", errProtocol, err)
		}
		msg := make([]byte, h.length)
		if _, err := io.ReadFull(conn, msg); err != nil {
			return fmt.Errorf("%w: reading refusal: %v", errHandshake, err)
		}
		if h.code == codeVersion {
			return &versionRefusedError{msg: printable(msg)}
		}
		return fmt.Errorf("%w: peer refused the connection: %s", errProtocol, printable(msg))
	default:
		return fmt.Errorf("%w: unexpected answer 0x%02x to the preface", errProtocol, b[0])
	}
}
