package transport

import "context"

// HandlerFunc serves requests that peers send with Call.
//
// It runs on its own goroutine, concurrently with other calls. ctx
// carries the caller's remaining deadline (measured on this node's clock
// from arrival) and is cancelled when the caller gives up, the connection
// breaks, or the Transport closes; the handler must return promptly then,
// because Close waits for running handlers. from is the remote network
// address of the connection (not necessarily the peer's advertise
// address). req is owned by the handler. A non-nil error reaches the caller
// as an error wrapping ErrRemote with err.Error() as text; a panic is
// recovered and reported to the caller the same way. PeerFromContext(ctx)
// says who dialed the connection the request came on.
type HandlerFunc func(ctx context.Context, from string, req []byte) ([]byte, error)

// peerKey is the context key of the caller's Peer.
type peerKey struct{}

func withPeer(ctx context.Context, p Peer) context.Context {
	return context.WithValue(ctx, peerKey{}, p)
}

// PeerFromContext returns, inside a HandlerFunc, the peer that dialed the
// connection the request came on: its Identity as its hello stated it
// (accepted by Config.CheckPeer; zero for a legacy version-1 peer) and, with
// TLS, its verified certificate chain, leaf first. Only the certificate is
// proof: an Identity is what the peer claims. ok is false outside a HandlerFunc.
func PeerFromContext(ctx context.Context) (p Peer, ok bool) {
	p, ok = ctx.Value(peerKey{}).(Peer)
	return p, ok
}
