package transport

import "fmt"

// The connection preface. Every connection (inside TLS when TLS is on)
// starts with two bytes from the dialer: a protocol type byte and that
// protocol's wire version. The listener reads them within HandshakeTimeout
// and answers before handing the connection to the Raft stream layer or to
// the RPC server:
//
//   - accepted: the same two bytes back;
//   - unsupported version: an error frame (frame.go) with codeVersion and a
//     message, then close — every future version keeps this reply;
//   - unknown type byte or anything else: close.
//
// The dialer waits for the answer, so a refused certificate (which TLS 1.3
// reports only after the client's handshake), a refused version or a
// non-raftlock listener fails the dial with ErrHandshake or ErrProtocol
// instead of a later, ambiguous read error. A new wire format gets a new
// version number.
const (
	protoRaft byte = 0xA1 // hashicorp/raft NetworkTransport stream
	protoRPC  byte = 0xA2 // multiplexed request/response frames (frame.go)

	raftVersion byte = 1
	rpcVersion  byte = 1

	prefaceLen = 2
)

// Reasons for refusing a connection (metric label values).
const (
	rejectTimeout     = "timeout"
	rejectTLS         = "tls"
	rejectEOF         = "eof"
	rejectRead        = "read_error"
	rejectUnknownType = "unknown_type"
	rejectBadVersion  = "bad_version"
	rejectNotAccepted = "not_accepted" // Raft conn nobody accepted in time
	rejectClosing     = "closing"
)

// prefaceError is a refused preface, with the metric reason.
type prefaceError struct {
	reason string
	proto  byte
	msg    string
}

func (e *prefaceError) Error() string { return e.msg }

// parsePreface decodes the two preface bytes into the protocol type.
func parsePreface(b [prefaceLen]byte) (byte, error) {
	proto, version := b[0], b[1]
	var want byte
	switch proto {
	case protoRaft:
		want = raftVersion
	case protoRPC:
		want = rpcVersion
	default:
		return 0, &prefaceError{reason: rejectUnknownType, proto: proto,
			msg: fmt.Sprintf("unknown protocol type byte 0x%02x", proto)}
	}
	if version != want {
		return 0, &prefaceError{reason: rejectBadVersion, proto: proto,
			msg: fmt.Sprintf("unsupported version %d of protocol 0x%02x (supported: %d)", version, proto, want)}
	}
	return proto, nil
}

func preface(proto byte) []byte {
	if proto == protoRaft {
		return []byte{protoRaft, raftVersion}
	}
	return []byte{protoRPC, rpcVersion}
}
