package transport

import "context"

// Handler serves requests that peers send with Call.
//
// HandleRPC runs on its own goroutine, concurrently with other calls. ctx
// carries the caller's remaining deadline (measured on this node's clock
// from arrival) and is cancelled when the caller gives up, the connection
// breaks, or the Transport closes; the handler must return promptly then,
// because Close waits for running handlers. from is the remote network
// address of the connection (not necessarily the peer's advertise
// address). req is owned by the handler. A non-nil error reaches the caller
// as an error wrapping ErrRemote with err.Error() as text; a panic is
// recovered and reported to the caller the same way.
type Handler interface {
	HandleRPC(ctx context.Context, from string, req []byte) ([]byte, error)
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, from string, req []byte) ([]byte, error)

// HandleRPC calls f(ctx, from, req).
func (f HandlerFunc) HandleRPC(ctx context.Context, from string, req []byte) ([]byte, error) {
	return f(ctx, from, req)
}
