package transport

import (
	"encoding/binary"
	"fmt"
	"io"
)

// RPC wire format, version 1 (after the preface protoRPC, rpcVersion).
//
// Both directions carry frames: a fixed 24-byte header and a payload.
//
//	offset size field
//	0      1    kind    (kindRequest … kindPong)
//	1      1    code    error code for kindError, else 0
//	2      2    reserved, must be 0
//	4      4    length  payload length, big endian
//	8      8    id      call id chosen by the client, echoed by the server
//	16     8    aux     kindRequest: remaining deadline in ns (0 = none), else 0
//
// Many calls are in flight on one connection; responses may come in any
// order and are matched by id. A client that gives up on a call sends
// kindCancel with its id; the server cancels the handler's context. The
// client pings every KeepaliveInterval and the server answers with a pong.
// A frame that breaks any rule closes the connection.
const (
	headerLen = 24

	kindRequest  byte = 1 // payload: opaque request
	kindResponse byte = 2 // payload: opaque response
	kindError    byte = 3 // payload: UTF-8 message; code says what failed
	kindCancel   byte = 4 // client gave up on call id; no payload
	kindPing     byte = 5 // no payload
	kindPong     byte = 6 // no payload

	// maxFrameLen is the hard wire limit on a payload (MaxMessageSize may
	// only lower it).
	maxFrameLen = 1 << 30

	// maxErrorLen bounds the message of an error frame.
	maxErrorLen = 64 << 10

	// maxDeadlineNanos bounds a request's deadline (about 146 years).
	maxDeadlineNanos = 1 << 62
)

// Error codes of kindError frames.
const (
	codeHandler   byte = 1 // the handler returned an error
	codeNoHandler byte = 2 // the server has no handler
	codeTooLarge  byte = 3 // the response exceeds the server's MaxMessageSize
	codeVersion   byte = 4 // preface version refused (id 0, then close)
	codePanic     byte = 5 // the handler panicked
)

// header is a decoded frame header.
type header struct {
	kind   byte
	code   byte
	length uint32
	id     uint64
	aux    uint64
}

// put encodes h into b[:headerLen].
func (h header) put(b []byte) {
	b[0] = h.kind
	b[1] = h.code
	b[2], b[3] = 0, 0
	binary.BigEndian.PutUint32(b[4:8], h.length)
	binary.BigEndian.PutUint64(b[8:16], h.id)
	binary.BigEndian.PutUint64(b[16:24], h.aux)
}

// newFrame returns one buffer holding the header and a copy of payload.
func newFrame(kind, code byte, id, aux uint64, payload []byte) []byte {
	b := make([]byte, headerLen+len(payload))
	header{kind: kind, code: code, length: uint32(len(payload)), id: id, aux: aux}.put(b)
	copy(b[headerLen:], payload)
	return b
}

// parseHeader decodes and validates a header. max bounds the payload.
func parseHeader(b []byte, max int) (header, error) {
	h := header{
		kind:   b[0],
		code:   b[1],
		length: binary.BigEndian.Uint32(b[4:8]),
		id:     binary.BigEndian.Uint64(b[8:16]),
		aux:    binary.BigEndian.Uint64(b[16:24]),
	}
	if b[2] != 0 || b[3] != 0 {
		return h, fmt.Errorf("%w: reserved header bytes set", errProtocol)
	}
	if h.kind < kindRequest || h.kind > kindPong {
		return h, fmt.Errorf("%w: unknown frame kind %d", errProtocol, h.kind)
	}
	if h.code != 0 && h.kind != kindError {
		return h, fmt.Errorf("%w: code %d on frame kind %d", errProtocol, h.code, h.kind)
	}
	if h.kind == kindError && h.code == 0 {
		return h, fmt.Errorf("%w: error frame without code", errProtocol)
	}
	if h.aux != 0 && h.kind != kindRequest {
		return h, fmt.Errorf("%w: aux field on frame kind %d", errProtocol, h.kind)
	}
	if h.kind == kindRequest && h.aux > maxDeadlineNanos {
		return h, fmt.Errorf("%w: request deadline %d ns out of range", errProtocol, h.aux)
	}
	switch h.kind {
	case kindCancel, kindPing, kindPong:
		if h.length != 0 {
			return h, fmt.Errorf("%w: payload on frame kind %d", errProtocol, h.kind)
		}
	case kindError:
		if h.length > maxErrorLen {
			return h, fmt.Errorf("%w: error message of %d bytes", errProtocol, h.length)
		}
	default:
		if int64(h.length) > int64(max) {
			return h, fmt.Errorf("%w: frame payload of %d bytes exceeds %d", errTooLarge, h.length, max)
		}
	}
	return h, nil
}

// readFrame reads one frame. hdr is scratch space for the header. The
// payload is freshly allocated (nil when empty) and owned by the caller.
// The payload buffer grows as bytes arrive (readPayload): a header alone
// never makes the reader allocate its declared length.
func readFrame(r io.Reader, hdr *[headerLen]byte, max int) (header, []byte, error) {
	return readFrameWithin(r, hdr, max, nil)
}

// readFrameWithin is readFrame with the payload's buffer held in b (nil:
// not accounted): on success the caller holds len(payload) bytes of b.
func readFrameWithin(r io.Reader, hdr *[headerLen]byte, max int, b byteBudget) (header, []byte, error) {
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return header{}, nil, err
	}
	h, err := parseHeader(hdr[:], max)
	if err != nil {
		return h, nil, err
	}
	if h.length == 0 {
		return h, nil, nil
	}
	payload, err := readPayload(r, int(h.length), b)
	if err != nil {
		return h, nil, err
	}
	return h, payload, nil
}

// byteBudget accounts for the bytes that payload buffers hold.
type byteBudget interface {
	// hold waits until n more bytes may be held; false: give up (the
	// connection failed or the transport closed), nothing held.
	hold(n int) bool
	// release returns n held bytes.
	release(n int)
}

// errBudget: a payload's reader gave up waiting for its byte budget.
var errBudget = fmt.Errorf("%w: gave up waiting for frame byte budget", errConnectionLost)

// initialPayloadBuf is the first allocation for a payload of unknown
// arrival; the buffer then doubles as bytes arrive.
const initialPayloadBuf = 4 << 10

// readPayload reads exactly n bytes into a buffer that starts small and
// doubles only when full, so the memory a partial payload pins is at most
// twice what arrived (plus initialPayloadBuf), not n. With b, each
// allocation is held in b first (waiting for it), so the buffer is within
// b's bounds at all times; on success n bytes of b are held (the buffer's
// capacity is n), on failure none.
func readPayload(r io.Reader, n int, b byteBudget) ([]byte, error) {
	var buf []byte
	held := 0
	for len(buf) < n {
		if len(buf) == cap(buf) {
			size := min(max(2*cap(buf), initialPayloadBuf), n)
			if b != nil {
				if !b.hold(size - held) {
					b.release(held)
					return nil, errBudget
				}
				held = size
			}
			grown := make([]byte, len(buf), size)
			copy(grown, buf)
			buf = grown
		}
		m, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+m]
		if err != nil && len(buf) < n {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			if b != nil {
				b.release(held)
			}
			return nil, err
		}
	}
	return buf, nil
}
