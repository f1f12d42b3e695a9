package transport

import "fmt"

// The connection preface. Every connection (inside TLS when TLS is on)
// starts with two bytes from the dialer: a protocol type byte and a wire
// version. The listener reads them within Inbound.HandshakeTimeout (without
// TLS, within Inbound.FirstByteTimeout) and answers:
//
//   - accepted: the same two bytes back;
//   - unsupported or refused version: an error frame (frame.go) with
//     codeVersion and a message, then close — every version keeps this
//     reply, and a dialer recognises it as "speak another version";
//   - unknown type byte or anything else: close.
//
// Versions (the same for both protocols):
//
//   - 1 (versionLegacy, the previous release): no hello; the Raft stream is
//     raw in both directions.
//   - 2 (versionHello): the hello (hello.go) follows the answer; then RPC
//     frames, or the Raft stream, whose dialer→listener direction is cut
//     into chunks so that an idle connection can carry keepalives
//     (raftstream.go).
//
// A dialer with Config.Identity speaks version 2; without, version 1. A
// listener always accepts version 2, and version 1 when it has no Identity
// or Config.AcceptLegacy says so. A version-2 dialer refused with
// codeVersion re-dials with version 1 when AcceptLegacy says so.
//
// The dialer waits for the answer, so a refused certificate (which TLS 1.3
// reports only after the client's handshake), a refused version or a
// non-raftlock listener fails the dial with errHandshake or errProtocol
// instead of a later, ambiguous read error. A new wire format gets a new
// version number.
const (
	protoRaft byte = 0xA1 // hashicorp/raft NetworkTransport stream
	protoRPC  byte = 0xA2 // multiplexed request/response frames (frame.go)

	versionLegacy byte = 1
	versionHello  byte = 2

	prefaceLen = 2
)

// Reasons for refusing a connection (metric label values).
const (
	rejectTimeout        = "timeout"
	rejectTLS            = "tls"
	rejectEOF            = "eof"
	rejectRead           = "read_error"
	rejectUnknownType    = "unknown_type"
	rejectBadVersion     = "bad_version"
	rejectLegacy         = "legacy"     // version 1 while legacy peers are refused
	rejectHello          = "hello"      // malformed or missing hello
	rejectIdentity       = "identity"   // CheckPeer refused the peer (either direction)
	rejectRefusedByPeer  = "refused"    // the dialer refused this node's identity
	rejectConnLimit      = "conn_limit" // Inbound.MaxConns inbound connections open
	rejectHostLimit      = "host_limit" // Inbound.MaxConnsPerHost from this address open
	rejectHandshakeLimit = "handshake_limit"
	// rejectHostHandshakeLimit: Inbound.MaxHandshakesPerHost from this
	// address in their handshake.
	rejectHostHandshakeLimit = "host_handshake_limit"
	// rejectFailureLimit: the address (or the strangers together) spent
	// its failed-handshake budget.
	rejectFailureLimit = "failure_limit"
	rejectNotAccepted  = "not_accepted" // Raft conn nobody accepted in time
	rejectClosing      = "closing"
)

// rejectReasons lists every reason, for initialising the metric's series.
var rejectReasons = []string{
	rejectTimeout, rejectTLS, rejectEOF, rejectRead, rejectUnknownType, rejectBadVersion,
	rejectLegacy, rejectHello, rejectIdentity, rejectRefusedByPeer, rejectConnLimit,
	rejectHostLimit, rejectHandshakeLimit, rejectHostHandshakeLimit, rejectFailureLimit,
	rejectNotAccepted, rejectClosing,
}

// chargedFailure reports whether a handshake refused for reason is charged
// to its source's failure budget: what a stranger without a certificate
// causes — a TLS failure, a timeout, a closed or broken connection,
// garbage — but not a refusal of a well-formed peer (a version, legacy or
// identity refusal), nor this node's own shutdown.
func chargedFailure(reason string) bool {
	switch reason {
	case rejectTimeout, rejectTLS, rejectEOF, rejectRead, rejectUnknownType, rejectHello:
		return true
	}
	return false
}

// prefaceError is a refused preface, with the metric reason.
type prefaceError struct {
	reason string
	proto  byte
	msg    string
}

func (e *prefaceError) Error() string { return e.msg }

// prefacePolicy is what a listener accepts.
type prefacePolicy struct {
	legacy bool // version 1 is admitted
	hello  bool // version 2 is admitted (false only in the test-only v1 mode)
}

// parsePreface decodes the two preface bytes into the protocol type and
// version, under policy p.
func parsePreface(b [prefaceLen]byte, p prefacePolicy) (proto, version byte, err error) {
	proto, version = b[0], b[1]
	if proto != protoRaft && proto != protoRPC {
		return 0, 0, &prefaceError{reason: rejectUnknownType, proto: proto,
			msg: fmt.Sprintf("unknown protocol type byte 0x%02x", proto)}
	}
	switch {
	case version == versionHello && p.hello:
		return proto, version, nil
	case version == versionLegacy && p.legacy:
		return proto, version, nil
	case version == versionLegacy && p.hello:
		return 0, 0, &prefaceError{reason: rejectLegacy, proto: proto,
			msg: fmt.Sprintf("version 1 of protocol 0x%02x refused: this node requires version 2 (identity hello); legacy peers are admitted only during a rolling upgrade", proto)}
	}
	supported := "1, 2"
	switch {
	case !p.hello:
		supported = "1"
	case !p.legacy:
		supported = "2"
	}
	return 0, 0, &prefaceError{reason: rejectBadVersion, proto: proto,
		msg: fmt.Sprintf("unsupported version %d of protocol 0x%02x (supported: %s)", version, proto, supported)}
}

func preface(proto, version byte) []byte { return []byte{proto, version} }
