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

	// ErrNoHandler: the peer has no Handler (wrapped together with ErrRemote).
	ErrNoHandler = errors.New("transport: no handler")

	// ErrHandshake: a connection could not be set up: TLS failure (wrong or
	// missing certificate, plaintext against TLS, …) or a refused preface.
	ErrHandshake = errors.New("transport: handshake failed")

	// ErrConnectionLost: the connection broke (peer closed, restarted,
	// reset, or stopped answering keepalives) while a call was in flight.
	// The request may or may not have been handled by the peer.
	ErrConnectionLost = errors.New("transport: connection lost")

	// ErrProtocol: the peer violated the wire protocol or speaks a version
	// this node does not support.
	ErrProtocol = errors.New("transport: protocol error")

	// ErrTooLarge: a request or response exceeds Config.MaxMessageSize.
	ErrTooLarge = errors.New("transport: message too large")

	// ErrInvalidConfig: Config.Validate found a problem.
	ErrInvalidConfig = errors.New("transport: invalid config")
)
