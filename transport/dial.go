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

// dialConn opens a connection to addr for proto: dial, TLS handshake when
// configured, preface. The whole set-up is bounded by ctx and by Close. It
// returns the raw connection (tracked, for Close) and the one to use (the
// TLS connection when TLS is on).
func (t *Transport) dialConn(ctx context.Context, addr string, proto byte) (net.Conn, net.Conn, error) {
	if t.isClosed() {
		return nil, nil, ErrClosed
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stopOnClose := context.AfterFunc(t.ctx, cancel)
	defer stopOnClose()

	raw, err := t.cfg.Dialer(ctx, addr)
	if err != nil {
		if t.isClosed() {
			return nil, nil, ErrClosed
		}
		return nil, nil, fmt.Errorf("transport: dial %s: %w", addr, err)
	}
	kind := connRPC
	if proto == protoRaft {
		kind = connRaft
	}
	if !t.track(raw, kind) {
		raw.Close()
		return nil, nil, ErrClosed
	}
	conn, err := t.setUp(ctx, raw, addr, proto)
	if err != nil {
		raw.Close()
		t.untrack(raw)
		switch {
		case t.isClosed():
			return nil, nil, ErrClosed
		case ctx.Err() != nil:
			return nil, nil, fmt.Errorf("transport: dial %s: %w", addr, ctx.Err())
		}
		return nil, nil, err
	}
	return raw, conn, nil
}

// setUp runs the client side of the handshake on a fresh connection: TLS
// when configured, the preface and its answer, all bounded by ctx (its
// deadline, and an immediate deadline when it is cancelled). It returns the
// connection to use.
func (t *Transport) setUp(ctx context.Context, raw net.Conn, addr string, proto byte) (net.Conn, error) {
	if dl, ok := ctx.Deadline(); ok {
		raw.SetDeadline(dl)
	}
	interrupt := context.AfterFunc(ctx, func() { raw.SetDeadline(time.Unix(1, 0)) })
	defer interrupt()
	conn := raw
	if t.cfg.TLS != nil {
		tc := tls.Client(raw, clientTLS(t.cfg.TLS, addr))
		if err := tc.HandshakeContext(ctx); err != nil {
			return nil, fmt.Errorf("%w: TLS with %s: %v", ErrHandshake, addr, err)
		}
		conn = tc
	}
	if _, err := conn.Write(preface(proto)); err != nil {
		return nil, fmt.Errorf("%w: preface to %s: %v", ErrHandshake, addr, err)
	}
	if err := readAck(conn, proto, t.cfg.MaxMessageSize); err != nil {
		return nil, fmt.Errorf("%w (%s)", err, addr)
	}
	if !interrupt() {
		// ctx ended meanwhile; the interrupt may have poisoned the deadline.
		return nil, ctx.Err()
	}
	if err := raw.SetDeadline(time.Time{}); err != nil {
		return nil, fmt.Errorf("transport: dial %s: %w", addr, err)
	}
	return conn, nil
}

// readAck reads the listener's answer to the preface (see handshake.go).
func readAck(conn net.Conn, proto byte, maxMsg int) error {
	var b [headerLen]byte
	if _, err := io.ReadFull(conn, b[:1]); err != nil {
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "remote error" {
			return fmt.Errorf("%w: peer refused the TLS session: %v", ErrHandshake, err)
		}
		return fmt.Errorf("%w: peer closed the connection instead of accepting the preface: %v", ErrHandshake, err)
	}
	switch b[0] {
	case proto:
		if _, err := io.ReadFull(conn, b[1:2]); err != nil {
			return fmt.Errorf("%w: reading preface answer: %v", ErrHandshake, err)
		}
		if want := preface(proto); b[1] != want[1] {
			return fmt.Errorf("%w: peer answered version %d to version %d", ErrProtocol, b[1], want[1])
		}
		return nil
	case kindError:
		if _, err := io.ReadFull(conn, b[1:]); err != nil {
			return fmt.Errorf("%w: reading refusal: %v", ErrHandshake, err)
		}
		h, err := parseHeader(b[:], maxMsg)
		if err != nil {
			return fmt.Errorf("%w: malformed refusal: %v", ErrProtocol, err)
		}
		msg := make([]byte, h.length)
		if _, err := io.ReadFull(conn, msg); err != nil {
			return fmt.Errorf("%w: reading refusal: %v", ErrHandshake, err)
		}
		return fmt.Errorf("%w: peer refused the connection: %s", ErrProtocol, printable(msg))
	default:
		return fmt.Errorf("%w: unexpected answer 0x%02x to the preface", ErrProtocol, b[0])
	}
}
