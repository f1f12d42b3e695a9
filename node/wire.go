package node

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/grantwire"
	"github.com/raftlock/raftlock/internal/lockinfo"
	"github.com/raftlock/raftlock/internal/replica"
)

// Forwarding messages between replicas. Every message starts with a version
// byte and a kind byte; a replica refuses a version it does not know.
//
//	apply request:      v, kindApply, fsm entry encoding (its At is ignored)
//	apply reply:        v, kindApply, n, n × (code, [index, result] | message)
//	keepalive request:  v, kindKeepAlive, session
//	keepalive reply:    v, kindKeepAlive, code, message
//	read-index request: v, kindReadIndex
//	read-index reply:   v, kindReadIndex, code, index, message
//	grant notice:       v, kindGrantNotice, n, n × (index, at, session, lock, owner[16], token)
//	grant notice reply: v, kindGrantNotice
//	peer-info request and reply: see peerinfo.go
//	commit nudge (6): see nudge.go; snapshot ask (7): see snapshot_ask.go;
//	keepalive batch (8): see keepalive_batch.go; confirm term (9): see
//	confirm_term.go
//
// An apply request carries commands in the entry version the cluster
// version allows (fsm.Downgrade), so that a leader of the previous release
// reads what a follower of this one forwards while the cluster version is
// 1; a leader reads both. Error codes 7 (not proposed) and later are unknown
// to the previous release: its decoder refuses the reply, and its caller
// retries.
const wireVersion byte = 1

const (
	kindApply       byte = 1
	kindKeepAlive   byte = 2
	kindReadIndex   byte = 3
	kindGrantNotice byte = 4
)

// code is how an error crosses the wire.
type code byte

const (
	codeOK code = iota
	codeNotLeader
	codeNoQuorum
	codeSessionExpired
	codeInvalid
	codeClosed
	codeInternal
	codeNotProposed
	maxCode = codeNotProposed
)

var errWire = errors.New("node: malformed message")

func errCode(err error) code {
	switch {
	case err == nil:
		return codeOK
	case errors.Is(err, ErrNotProposed):
		return codeNotProposed
	case errors.Is(err, errNotLeader), errors.Is(err, errNoLeader), errors.Is(err, ErrHalted):
		return codeNotLeader
	case errors.Is(err, ErrNoQuorum):
		return codeNoQuorum
	case errors.Is(err, replica.ErrSessionExpired):
		return codeSessionExpired
	case errors.Is(err, ErrInvalidArgument):
		return codeInvalid
	case errors.Is(err, ErrClosed):
		return codeClosed
	}
	return codeInternal
}

// remoteErr rebuilds an error from the wire; the sentinel is kept for
// errors.Is, the leader's message for people.
func remoteErr(c code, msg string) error {
	var base error
	switch c {
	case codeOK:
		return nil
	case codeNotLeader:
		base = errNotLeader
	case codeNoQuorum:
		base = ErrNoQuorum
	case codeSessionExpired:
		base = replica.ErrSessionExpired
	case codeInvalid:
		base = ErrInvalidArgument
	case codeClosed:
		// The leader is shutting down: for the caller that is "no leader",
		// but what it took may still commit.
		return fmt.Errorf("%w: %w (leader: %s)", errNotLeader, errLeaderClosed, msg)
	case codeNotProposed:
		base = ErrNotProposed
	default:
		return fmt.Errorf("node: leader error: %s", msg)
	}
	return fmt.Errorf("%w (leader: %s)", base, msg)
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendErr(b []byte, err error) []byte {
	b = append(b, byte(errCode(err)))
	if err == nil {
		return appendString(b, "")
	}
	msg := err.Error()
	if len(msg) > 1024 {
		msg = msg[:1024]
	}
	return appendString(b, msg)
}

// reader decodes a message; the first error sticks.
type reader struct {
	b   []byte
	err error
}

func (r *reader) byte() byte {
	if r.err != nil || len(r.b) == 0 {
		r.fail()
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail()
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) string() string {
	n := r.uvarint()
	if r.err != nil || n > uint64(len(r.b)) || n > 1024 {
		r.fail()
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

func (r *reader) errValue() error {
	c := code(r.byte())
	msg := r.string()
	if r.err == nil && c > maxCode {
		r.fail()
	}
	return remoteErr(c, msg)
}

func (r *reader) fail() {
	if r.err == nil {
		r.err = errWire
	}
}

func (r *reader) header(kind byte) {
	if v := r.byte(); r.err == nil && v != wireVersion {
		r.err = fmt.Errorf("%w: unknown version %d", errWire, v)
	}
	if k := r.byte(); r.err == nil && k != kind {
		r.err = fmt.Errorf("%w: kind %d, want %d", errWire, k, kind)
	}
}

func (r *reader) end() error {
	if r.err == nil && len(r.b) != 0 {
		r.err = fmt.Errorf("%w: %d trailing bytes", errWire, len(r.b))
	}
	return r.err
}

// requestKind returns the kind of a request after checking its version.
func requestKind(b []byte) (byte, error) {
	if len(b) < 2 {
		return 0, fmt.Errorf("%w: short request", errWire)
	}
	if b[0] != wireVersion {
		return 0, fmt.Errorf("%w: unknown version %d", errWire, b[0])
	}
	return b[1], nil
}

func encodeApplyRequest(cmds []fsm.Command) ([]byte, error) {
	return fsm.AppendEntry([]byte{wireVersion, kindApply}, fsm.Entry{Commands: cmds})
}

func decodeApplyRequest(b []byte) ([]fsm.Command, error) {
	if k, err := requestKind(b); err != nil || k != kindApply {
		return nil, fmt.Errorf("%w: not an apply request", errWire)
	}
	e, err := fsm.DecodeEntry(b[2:])
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errWire, err)
	}
	return e.Commands, nil
}

// outcome is the result of one proposed command. res points at the Result
// (nil with err, or when there is none): into the leader's fsm.Response or
// the decoded reply, never copied, so that a proposal (which holds its
// outcome) stays small — fsm.Result is some 170 bytes and a Lock+Unlock
// from a follower makes four proposals. The Result it points at is never
// written after the outcome is made.
type outcome struct {
	res   *fsm.Result
	index uint64
	err   error
}

// result returns the command's Result, or the zero Result if there is none.
func (o outcome) result() fsm.Result {
	if o.res == nil {
		return fsm.Result{}
	}
	return *o.res
}

func encodeApplyReply(outs []outcome) []byte {
	b := []byte{wireVersion, kindApply}
	b = binary.AppendUvarint(b, uint64(len(outs)))
	for _, o := range outs {
		b = appendErr(b, o.err)
		if o.err == nil {
			b = binary.AppendUvarint(b, o.index)
			b = fsm.AppendResult(b, o.result())
		}
	}
	return b
}

func decodeApplyReply(b []byte, want int) ([]outcome, error) {
	r := reader{b: b}
	r.header(kindApply)
	n := r.uvarint()
	if r.err == nil && n != uint64(want) {
		return nil, fmt.Errorf("%w: %d results for %d commands", errWire, n, want)
	}
	outs := make([]outcome, 0, want)
	results := make([]fsm.Result, want) // one allocation for the batch's Results
	for i := 0; i < want && r.err == nil; i++ {
		var o outcome
		if o.err = r.errValue(); o.err == nil && r.err == nil {
			o.index = r.uvarint()
			if r.err == nil {
				res, rest, err := fsm.DecodeResult(r.b)
				if err != nil {
					r.err = fmt.Errorf("%w: %w", errWire, err)
					break
				}
				results[i] = res
				o.res, r.b = &results[i], rest
			}
		}
		outs = append(outs, o)
	}
	if err := r.end(); err != nil {
		return nil, err
	}
	return outs, nil
}

func encodeKeepAliveRequest(s lockinfo.SessionID) []byte {
	return binary.AppendUvarint([]byte{wireVersion, kindKeepAlive}, uint64(s))
}

func decodeKeepAliveRequest(b []byte) (lockinfo.SessionID, error) {
	r := reader{b: b}
	r.header(kindKeepAlive)
	s := lockinfo.SessionID(r.uvarint())
	return s, r.end()
}

func encodeKeepAliveReply(err error) []byte {
	return appendErr([]byte{wireVersion, kindKeepAlive}, err)
}

// decodeKeepAliveReply returns the leader's verdict, or a decoding error.
func decodeKeepAliveReply(b []byte) (verdict error, err error) {
	r := reader{b: b}
	r.header(kindKeepAlive)
	verdict = r.errValue()
	if err := r.end(); err != nil {
		return nil, err
	}
	return verdict, nil
}

// encodeIndexRequest is a request that carries one log index (the commit
// nudge, the snapshot ask): header, then the index as a uvarint.
func encodeIndexRequest(kind byte, index uint64) []byte {
	return binary.AppendUvarint([]byte{wireVersion, kind}, index)
}

// decodeIndexRequest decodes an encodeIndexRequest of the given kind.
func decodeIndexRequest(b []byte, kind byte) (uint64, error) {
	r := reader{b: b}
	r.header(kind)
	index := r.uvarint()
	return index, r.end()
}

func encodeReadIndexRequest() []byte { return []byte{wireVersion, kindReadIndex} }

func encodeReadIndexReply(index uint64, err error) []byte {
	b := []byte{wireVersion, kindReadIndex}
	b = appendErr(b, err)
	return binary.AppendUvarint(b, index)
}

func decodeReadIndexReply(b []byte) (index uint64, verdict error, err error) {
	r := reader{b: b}
	r.header(kindReadIndex)
	verdict = r.errValue()
	index = r.uvarint()
	if err := r.end(); err != nil {
		return 0, nil, err
	}
	return index, verdict, nil
}

func encodeGrantNotice(grants []fsm.Event) []byte {
	return grantwire.AppendGrants([]byte{wireVersion, kindGrantNotice}, grants)
}

// decodeGrantNotice returns the announced grants as EventGranted events
// (FromQueue), refusing a malformed or implausible one (grantwire.DecodeGrants).
func decodeGrantNotice(b []byte) ([]fsm.Event, error) {
	if k, err := requestKind(b); err != nil || k != kindGrantNotice {
		return nil, fmt.Errorf("%w: not a grant notice", errWire)
	}
	grants, err := grantwire.DecodeGrants(b[2:])
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errWire, err)
	}
	return grants, nil
}

func encodeGrantNoticeReply() []byte { return []byte{wireVersion, kindGrantNotice} }
