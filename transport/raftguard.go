package transport

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// raftGuard bounds what one inbound Raft message can make raft allocate.
//
// hashicorp/raft's NetworkTransport reads each request as a type byte and
// a msgpack value (go-msgpack v2), and, for InstallSnapshot, the snapshot's
// Size bytes after it. Its decoder does not trust declared lengths: byte
// and string payloads grow in 256 KiB steps as bytes arrive, and a
// collection's first allocation is capped (decInferLen). But every element
// of Entries (a []*Log) allocates a Log of about 120 bytes, from as little
// as one byte on the wire (an empty map): a partial AppendEntries could
// pin a hundred times what it sent. So the guard walks the msgpack
// structure of the stream before raft's decoder sees the bytes and closes
// the connection when a request
//
//   - has a type byte other than raft's five RPC types,
//   - nests containers deeper than maxRaftDepth,
//   - declares an array longer than maxRaftArray (raft refuses
//     MaxAppendEntries > 1024, so no legitimate Entries is longer) or a map
//     with more than maxRaftMap pairs (raft's structs have a dozen fields),
//   - holds more than maxRaftValues values in all (1024 entries of about a
//     dozen values each, with room to spare),
//   - is an InstallSnapshot without a non-negative Size.
//
// These bounds hold for every message raft v1.7.3 sends. What remains: a
// byte or string payload (an entry's Data) has no bound here, since
// legitimate entries can be large; it costs about twice the bytes that
// arrived, and only while bytes keep arriving (RaftIdleTimeout). The guard
// itself allocates nothing per message.
//
// The guard also holds the vote gate (Config.RaftVoteGate): when a
// request's type byte says RequestVote or RequestPreVote and the gate says
// no, feed returns errVoteRefused before that byte reaches raft.
//
// A raftGuard is used by one reader; the zero value expects a type byte
// and lets every vote request pass.
type raftGuard struct {
	vote  func() bool // nil: every vote request passes
	st    guardState
	rpc   byte
	hdr   [9]byte // a value's header bytes (type byte first)
	hn    int     // header bytes read
	need  int     // header bytes the type byte calls for
	skip  uint64  // payload (or snapshot) bytes still to pass
	stack [maxRaftDepth]uint32
	depth int
	vals  int // values in this message

	// InstallSnapshot: the value of its top-level key "Size".
	key, keyLen int // top-level key being captured (into kbuf)
	kbuf        [4]byte
	sizeKey     bool // the value being read follows the key "Size"
	size        int64
	sizeSet     bool
}

type guardState uint8

const (
	guardRPC      guardState = iota // expecting a request's type byte
	guardValue                      // expecting a value's type byte
	guardHeader                     // reading the rest of a value's header
	guardPayload                    // passing a value's payload
	guardSnapshot                   // passing InstallSnapshot data
)

// Bounds on one Raft request (see raftGuard).
const (
	maxRaftDepth  = 8
	maxRaftArray  = 1024
	maxRaftMap    = 64
	maxRaftValues = 1 << 15
	// Raft's RPC types (the rpc* constants of raft.NetworkTransport):
	// AppendEntries, RequestVote, InstallSnapshot, TimeoutNow,
	// RequestPreVote.
	raftRPCTypes        = 5
	raftRequestVote     = 1
	raftInstallSnapshot = 2
	raftRequestPreVote  = 4
)

// errVoteRefused: the vote gate refused a RequestVote or RequestPreVote.
// Not a protocol violation: the peer did nothing wrong.
var errVoteRefused = errors.New("transport: vote request refused: this node may not vote now")

// feed inspects the next bytes of the stream, in order. It returns an error
// wrapping errProtocol at the first violation (and must not be fed again).
func (g *raftGuard) feed(b []byte) error {
	for len(b) > 0 {
		switch g.st {
		case guardRPC:
			if b[0] >= raftRPCTypes {
				return fmt.Errorf("%w: unknown Raft RPC type %d", errProtocol, b[0])
			}
			if (b[0] == raftRequestVote || b[0] == raftRequestPreVote) && g.vote != nil && !g.vote() {
				return errVoteRefused
			}
			g.rpc, g.vals, g.sizeSet, g.st = b[0], 0, false, guardValue
			b = b[1:]
		case guardValue:
			g.hdr[0], g.hn = b[0], 1
			g.need = headerLenOf(b[0])
			b = b[1:]
			g.st = guardHeader
			if err := g.headerDone(); err != nil {
				return err
			}
		case guardHeader:
			n := copy(g.hdr[g.hn:g.need], b)
			g.hn += n
			b = b[n:]
			if err := g.headerDone(); err != nil {
				return err
			}
		case guardPayload:
			n := min(uint64(len(b)), g.skip)
			if g.key >= 0 && g.keyLen < len(g.kbuf) {
				g.keyLen += copy(g.kbuf[g.keyLen:], b[:n])
			}
			g.skip -= n
			b = b[n:]
			if g.skip == 0 {
				g.valueDone()
			}
		case guardSnapshot:
			n := min(uint64(len(b)), g.skip)
			g.skip -= n
			b = b[n:]
			if g.skip == 0 {
				g.st = guardRPC
			}
		}
	}
	return nil
}

// headerDone acts on a value's header once all of it has arrived.
func (g *raftGuard) headerDone() error {
	if g.hn < g.need {
		return nil
	}
	if g.vals++; g.vals > maxRaftValues {
		return fmt.Errorf("%w: Raft request of more than %d values", errProtocol, maxRaftValues)
	}
	atKey := g.depth == 1 && g.stack[0]%2 == 0 // the top-level map's keys
	g.key = -1
	t := g.hdr[0]
	switch kind, n := valueKind(g.hdr[:g.need]); kind {
	case kindScalar:
		if g.sizeKey {
			g.size, g.sizeSet = intValue(g.hdr[:g.need])
		}
		g.valueDone()
	case kindBytes:
		if atKey {
			g.key, g.keyLen = 0, 0
			if n > uint64(len(g.kbuf)) {
				g.key = -1 // longer than "Size": not captured
			}
		}
		if n == 0 {
			g.valueDone()
			return nil
		}
		g.skip, g.st = n, guardPayload
	case kindArray, kindMap:
		max, items := uint64(maxRaftArray), n
		if kind == kindMap {
			max, items = maxRaftMap, 2*n
		}
		switch {
		case n > max:
			return fmt.Errorf("%w: Raft request declares a container of %d elements (at most %d)", errProtocol, n, max)
		case g.depth == maxRaftDepth:
			return fmt.Errorf("%w: Raft request nested deeper than %d", errProtocol, maxRaftDepth)
		case items == 0:
			g.valueDone()
			return nil
		}
		g.stack[g.depth] = uint32(items)
		g.depth++
		g.st = guardValue
	default:
		return fmt.Errorf("%w: invalid msgpack type byte 0x%02x in a Raft request", errProtocol, t)
	}
	return nil
}

// valueDone completes a value: it counts against its container, closing
// every container it completes; a completed top-level value ends the
// request.
func (g *raftGuard) valueDone() {
	g.st = guardValue
	wasKey := g.key >= 0 && g.depth == 1
	g.sizeKey = wasKey && g.keyLen == 4 && string(g.kbuf[:]) == "Size"
	g.key = -1
	for g.depth > 0 {
		if g.stack[g.depth-1]--; g.stack[g.depth-1] > 0 {
			return
		}
		g.depth--
		g.sizeKey = false
	}
	g.sizeKey = false
	g.st = guardRPC
	if g.rpc == raftInstallSnapshot {
		if g.sizeSet && g.size > 0 {
			g.skip, g.st = uint64(g.size), guardSnapshot
		}
	}
}

// checkEnd is called by feed's caller after a request's top-level value:
// an InstallSnapshot needs its Size. (feed reports it when the next byte
// arrives, see sizeMissing.)

// valueKinds of msgpack type bytes.
const (
	kindInvalid = iota
	kindScalar
	kindBytes // str, bin, ext: a length, then that many bytes
	kindArray
	kindMap
)

// headerLenOf is the header length (type byte included) a msgpack type
// byte calls for.
func headerLenOf(t byte) int {
	switch {
	case t <= 0x7f, t >= 0xe0, t >= 0x80 && t <= 0xbf, t == 0xc0, t == 0xc2, t == 0xc3:
		return 1
	}
	switch t {
	case 0xc4, 0xd9, 0xcc, 0xd0: // bin8, str8, uint8, int8
		return 2
	case 0xc5, 0xda, 0xcd, 0xd1, 0xdc, 0xde: // bin16, str16, uint16, int16, array16, map16
		return 3
	case 0xc7: // ext8: len, type
		return 3
	case 0xc8: // ext16
		return 4
	case 0xc6, 0xdb, 0xce, 0xd2, 0xca, 0xdd, 0xdf: // bin32, str32, uint32, int32, float32, array32, map32
		return 5
	case 0xc9: // ext32
		return 6
	case 0xcf, 0xd3, 0xcb: // uint64, int64, float64
		return 9
	case 0xd4, 0xd5, 0xd6, 0xd7, 0xd8: // fixext: type
		return 2
	}
	return 1 // 0xc1 (never used): rejected by valueKind
}

// valueKind classifies a complete header and returns its length field
// (payload bytes, array elements or map pairs).
func valueKind(h []byte) (int, uint64) {
	t := h[0]
	switch {
	case t <= 0x7f || t >= 0xe0 || t == 0xc0 || t == 0xc2 || t == 0xc3:
		return kindScalar, 0
	case t >= 0x80 && t <= 0x8f:
		return kindMap, uint64(t & 0x0f)
	case t >= 0x90 && t <= 0x9f:
		return kindArray, uint64(t & 0x0f)
	case t >= 0xa0 && t <= 0xbf:
		return kindBytes, uint64(t & 0x1f)
	}
	switch t {
	case 0xcc, 0xcd, 0xce, 0xcf, 0xd0, 0xd1, 0xd2, 0xd3, 0xca, 0xcb:
		return kindScalar, 0
	case 0xc4, 0xd9:
		return kindBytes, uint64(h[1])
	case 0xc5, 0xda:
		return kindBytes, uint64(binary.BigEndian.Uint16(h[1:]))
	case 0xc6, 0xdb:
		return kindBytes, uint64(binary.BigEndian.Uint32(h[1:]))
	case 0xc7:
		return kindBytes, uint64(h[1])
	case 0xc8:
		return kindBytes, uint64(binary.BigEndian.Uint16(h[1:]))
	case 0xc9:
		return kindBytes, uint64(binary.BigEndian.Uint32(h[1:]))
	case 0xd4, 0xd5, 0xd6, 0xd7, 0xd8:
		return kindBytes, 1 << (t - 0xd4)
	case 0xdc:
		return kindArray, uint64(binary.BigEndian.Uint16(h[1:]))
	case 0xdd:
		return kindArray, uint64(binary.BigEndian.Uint32(h[1:]))
	case 0xde:
		return kindMap, uint64(binary.BigEndian.Uint16(h[1:]))
	case 0xdf:
		return kindMap, uint64(binary.BigEndian.Uint32(h[1:]))
	}
	return kindInvalid, 0
}

// intValue decodes an integer header (ok false for other scalars).
func intValue(h []byte) (int64, bool) {
	t := h[0]
	switch {
	case t <= 0x7f:
		return int64(t), true
	case t >= 0xe0:
		return int64(int8(t)), true
	}
	switch t {
	case 0xcc:
		return int64(h[1]), true
	case 0xcd:
		return int64(binary.BigEndian.Uint16(h[1:])), true
	case 0xce:
		return int64(binary.BigEndian.Uint32(h[1:])), true
	case 0xcf:
		v := binary.BigEndian.Uint64(h[1:])
		return int64(v), v <= 1<<63-1
	case 0xd0:
		return int64(int8(h[1])), true
	case 0xd1:
		return int64(int16(binary.BigEndian.Uint16(h[1:]))), true
	case 0xd2:
		return int64(int32(binary.BigEndian.Uint32(h[1:]))), true
	case 0xd3:
		return int64(binary.BigEndian.Uint64(h[1:])), true
	}
	return 0, false
}
