package transport

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"time"
	"unicode/utf8"
)

// Identity is what a node tells a peer about itself when a connection opens.
type Identity struct {
	NodeID      string // the node's configured id
	Incarnation string // its data dir's incarnation id
	ClusterID   string // "" while the node belongs to no cluster
}

// The hello, preface version 2 (both protocols). After the listener
// accepted the preface, the two sides exchange hello messages:
//
//	dialer   → listener: msgHello (the dialer's Identity)
//	listener → dialer:   msgHello (the listener's Identity) or msgRefuse, then close
//	dialer   → listener: msgAccept, or msgRefuse and close
//
// and only then does the connection carry Raft or RPC traffic. Each side
// vets the other's Identity with Config.CheckPeer before answering, so a
// refusal always reaches the refused side with its reason. The listener
// runs the exchange within Inbound.HandshakeTimeout, the dialer within its
// context.
//
// Every message is
//
//	offset size field
//	0      1    type    (msgHello, msgAccept, msgRefuse)
//	1      2    length  of the body, big endian, at most maxHelloBody
//	3      n    body
//
// A msgAccept body is empty; a msgRefuse body is the reason, UTF-8, at most
// maxReasonLen bytes. A msgHello body is
//
//	offset size field
//	0      1    helloFormat (1)
//	1      4    idle: the sender's inbound idle limit in milliseconds (0: none);
//	            the peer must send something at least every idle/3 (see raftstream.go)
//	5      1+n  NodeID: a length byte, then n bytes of UTF-8
//	…      1+n  Incarnation, the same way
//	…      1+n  ClusterID, the same way
//
// with nothing after ClusterID. Anything else — an unknown type or format,
// a length past the bound, invalid UTF-8, trailing bytes — is a protocol
// error that closes the connection.
const (
	msgHello  byte = 1
	msgAccept byte = 2
	msgRefuse byte = 3

	helloFormat byte = 1

	msgHeaderLen = 3
	maxHelloBody = 1024
	maxIdentity  = 255 // bytes in each Identity field
	maxReasonLen = 512
)

// hello is a decoded msgHello body.
type hello struct {
	id   Identity
	idle time.Duration // the sender's inbound idle limit; 0 = none
}

// checkIdentity reports why id cannot be sent in a hello, or nil.
func checkIdentity(id Identity) error {
	for _, f := range []struct{ name, v string }{
		{"NodeID", id.NodeID}, {"Incarnation", id.Incarnation}, {"ClusterID", id.ClusterID},
	} {
		if len(f.v) > maxIdentity {
			return fmt.Errorf("identity %s is %d bytes (at most %d)", f.name, len(f.v), maxIdentity)
		}
		if !utf8.ValidString(f.v) {
			return fmt.Errorf("identity %s is not valid UTF-8", f.name)
		}
	}
	return nil
}

// encodeHello returns the msgHello message for h. h.id must pass
// checkIdentity; idle is rounded up to whole milliseconds.
func encodeHello(h hello) []byte {
	body := []byte{helloFormat}
	ms := (h.idle + time.Millisecond - 1) / time.Millisecond
	body = binary.BigEndian.AppendUint32(body, uint32(min(max(ms, 0), math.MaxUint32)))
	for _, s := range []string{h.id.NodeID, h.id.Incarnation, h.id.ClusterID} {
		body = append(body, byte(len(s)))
		body = append(body, s...)
	}
	return encodeMsg(msgHello, body)
}

// encodeRefuse returns the msgRefuse message for reason (made valid UTF-8
// and truncated to maxReasonLen).
func encodeRefuse(reason string) []byte {
	return encodeMsg(msgRefuse, []byte(truncate(printable([]byte(reason)), maxReasonLen)))
}

func encodeMsg(typ byte, body []byte) []byte {
	b := make([]byte, msgHeaderLen, msgHeaderLen+len(body))
	b[0] = typ
	binary.BigEndian.PutUint16(b[1:], uint16(len(body)))
	return append(b, body...)
}

// errHelloFormat marks a malformed hello message (wrapped in errProtocol).
var errHelloFormat = errors.New("malformed hello")

// readMsg reads one hello-phase message. The body is at most maxHelloBody
// bytes, so nothing large is ever allocated.
func readMsg(r io.Reader) (byte, []byte, error) {
	var h [msgHeaderLen]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, nil, err
	}
	typ, n := h[0], int(binary.BigEndian.Uint16(h[1:]))
	switch {
	case typ < msgHello || typ > msgRefuse:
		return 0, nil, fmt.Errorf("%w: %w: message type %d", errProtocol, errHelloFormat, typ)
	case n > maxHelloBody:
		return 0, nil, fmt.Errorf("%w: %w: body of %d bytes", errProtocol, errHelloFormat, n)
	case typ == msgAccept && n != 0:
		return 0, nil, fmt.Errorf("%w: %w: accept with a body", errProtocol, errHelloFormat)
	case typ == msgRefuse && n > maxReasonLen:
		return 0, nil, fmt.Errorf("%w: %w: reason of %d bytes", errProtocol, errHelloFormat, n)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return 0, nil, err
	}
	return typ, body, nil
}

// decodeHello decodes a msgHello body.
func decodeHello(body []byte) (hello, error) {
	bad := func(what string) (hello, error) {
		return hello{}, fmt.Errorf("%w: %w: %s", errProtocol, errHelloFormat, what)
	}
	if len(body) < 5 {
		return bad("short body")
	}
	if body[0] != helloFormat {
		return bad(fmt.Sprintf("format %d", body[0]))
	}
	h := hello{idle: time.Duration(binary.BigEndian.Uint32(body[1:5])) * time.Millisecond}
	rest := body[5:]
	var fields [3]string
	for i := range fields {
		if len(rest) < 1 || len(rest) < 1+int(rest[0]) {
			return bad("truncated identity")
		}
		n := int(rest[0])
		fields[i] = string(rest[1 : 1+n])
		rest = rest[1+n:]
	}
	if len(rest) != 0 {
		return bad("trailing bytes")
	}
	h.id = Identity{NodeID: fields[0], Incarnation: fields[1], ClusterID: fields[2]}
	if err := checkIdentity(h.id); err != nil {
		return bad(err.Error())
	}
	return h, nil
}
