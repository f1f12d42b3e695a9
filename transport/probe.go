package transport

import (
	"context"
	"crypto/x509"
	"errors"
)

// Peer is what Probe learned about the node at an address.
type Peer struct {
	Identity     Identity
	Certificates []*x509.Certificate // nil without TLS
}

// Probe opens a fresh RPC connection to addr, completes the handshake and the
// hello, and closes it. It reports the peer's Identity and, with TLS, its
// verified certificate chain (leaf first) — the lead uses it to prove a new
// member's identity before adding it to the Raft configuration.
//
// Probe always speaks version 2 (a legacy peer fails it with an error
// wrapping errProtocol) and runs CheckPeer like any dial: when CheckPeer
// refuses the peer, Probe returns the peer's Identity together with an
// error wrapping errHandshake and CheckPeer's error. Other errors are those
// of a dial: ctx.Err(), errRefused (the peer refused this node), errHandshake,
// errProtocol, ErrClosed. Safe for concurrent use.
func (t *Transport) Probe(ctx context.Context, addr string) (Peer, error) {
	s, err := t.dialConn(ctx, addr, protoRPC, dialProbe)
	if err != nil {
		var pr *peerRefusedError
		if errors.As(err, &pr) {
			return Peer{Identity: pr.peer}, err
		}
		return Peer{}, err
	}
	defer func() {
		s.conn.Close()
		s.raw.Close()
		t.untrack(s.raw)
	}()
	return Peer{Identity: s.peer.id, Certificates: verifiedChain(s.conn)}, nil
}
