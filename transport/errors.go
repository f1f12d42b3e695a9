package transport

import "errors"

// Sentinel errors. Errors returned by this package wrap them with %w; test
// with errors.Is.
var (
	// ErrClosed: the Transport (or its StreamLayer) was closed.
	ErrClosed = errors.New("transport: closed")

	// ErrRemote: the peer's handler returned an error, or the peer refused
	// the request. The error text carries the peer's message.
	ErrRemote = errors.New("transport: remote error")

	// errNoHandler: the peer has no HandlerFunc (wrapped together with ErrRemote).
	errNoHandler = errors.New("transport: no handler")

	// errHandshake: a connection could not be set up: TLS failure (wrong or
	// missing certificate, plaintext against TLS, …) or a refused preface.
	errHandshake = errors.New("transport: handshake failed")

	// errConnectionLost: the connection broke (peer closed, restarted,
	// reset, or stopped answering keepalives) while a call was in flight.
	// The request may or may not have been handled by the peer.
	errConnectionLost = errors.New("transport: connection lost")

	// errProtocol: the peer violated the wire protocol or speaks a version
	// this node does not support.
	errProtocol = errors.New("transport: protocol error")

	// errTooLarge: a request or response exceeds Config.MaxMessageSize.
	errTooLarge = errors.New("transport: message too large")

	// errInvalidConfig: Config.Validate found a problem.
	errInvalidConfig = errors.New("transport: invalid config")
)
