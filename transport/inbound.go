package transport

import (
	"fmt"
	"time"
)

// InboundLimits bound what inbound connections — anyone who can reach the
// port, before and after a handshake — can make a node hold, and keep
// strangers from starving the cluster's own members of handshakes.
//
// A source address is a member's when Config.MemberHost says so (a node
// reports the addresses of its Raft configuration, its static peers and
// its gossip members); every other address is a stranger's. Strangers
// share MaxHandshakes handshake slots, at most MaxHandshakesPerHost each;
// members may use MemberReserve more slots on top, which strangers never
// get. A stranger that shares a member's address (a process on the
// member's machine, or behind the same NAT) is indistinguishable from it:
// it gets that address's share of the reserve (a quarter at most) and
// spends that address's failure budget, so it can delay that member's new
// connections, never those of members on other addresses.
//
// The zero value of every field means its default (defaultInboundLimits);
// negative values are invalid. Strangers' IPv6 addresses count per /64
// prefix (one attacker usually holds a whole /64), members' per address.
type InboundLimits struct {
	// MaxConns bounds the inbound connections open at once, and
	// MaxConnsPerHost those from one source address. Members may open
	// MemberReserve connections beyond MaxConns. Defaults 512 and 64.
	MaxConns        int
	MaxConnsPerHost int

	// MaxHandshakes bounds the inbound connections in their handshake (TLS,
	// preface, hello) that strangers may hold, MaxHandshakesPerHost those of
	// one source address (members: plus a quarter of MemberReserve).
	// Defaults 128 and 8: it takes 16 addresses to fill them.
	MaxHandshakes        int
	MaxHandshakesPerHost int

	// MemberReserve is the number of handshake slots, and of connections
	// beyond MaxConns, that only members' addresses may use. One address
	// takes at most a quarter of it. Default 64.
	MemberReserve int

	// FirstByteTimeout bounds the arrival of a connection's first message:
	// under TLS the whole first TLS record (the ClientHello), without TLS
	// the two-byte preface. A connection that sent nothing, or one byte and
	// stalled, frees its slot after this long. Default 1s; a value above
	// HandshakeTimeout acts as HandshakeTimeout.
	FirstByteTimeout time.Duration

	// HandshakeTimeout bounds, for each accepted connection, the TLS
	// handshake, the arrival of the protocol preface and the hello.
	// Default 5s.
	HandshakeTimeout time.Duration

	// FailedHandshakesPerHost is how many failed handshakes (a TLS failure
	// such as a missing certificate, a timeout, garbage or a closed
	// connection before the hello) one source address may cause per second
	// on average, and FailedHandshakes how many all strangers' addresses
	// together may: each may save up ten seconds' worth. A connection is
	// charged when it is admitted and refunded when its handshake succeeds
	// (its TLS handshake completed: its peer holds a certificate the CA
	// signed) or is refused for a reason that is no failure (a version or
	// identity refusal), so handshakes in progress count too. An address
	// (or, for strangers, the strangers together) over its budget has its
	// new connections closed at once, before any TLS work, until it has
	// earned a failure back. Defaults 4 and 64 — a failed TLS handshake
	// costs the node about half a millisecond of CPU.
	FailedHandshakesPerHost int
	FailedHandshakes        int

	// MaxFrameBytesPerConn bounds the RPC frame bytes one inbound connection
	// holds: the request being read (counted as it arrives) and those its
	// running handlers hold. MaxFrameBytes bounds them over all inbound
	// connections. Beyond either, a connection's reader waits until bytes
	// are released (a connection that waits for three keepalive intervals
	// without completing a frame is closed as dead). Defaults (zero)
	// 4 × MaxMessageSize (at most MaxFrameBytes) and 8 × MaxMessageSize:
	// 64 MiB and 128 MiB. MaxFrameBytesPerConn must be at least
	// MaxMessageSize, and at most MaxFrameBytes.
	MaxFrameBytesPerConn int
	MaxFrameBytes        int
}

// Default inbound limits (see InboundLimits).
const (
	defaultMaxConns             = 512
	defaultMaxConnsPerHost      = 64
	defaultMaxHandshakes        = 128
	defaultMaxHandshakesPerHost = 8
	defaultMemberReserve        = 64
	defaultFirstByteTimeout     = time.Second
	defaultHandshakeTimeout     = 5 * time.Second
	defaultFailedPerHost        = 4
	defaultFailed               = 64
	frameBytesPerConnFactor     = 4
	frameBytesFactor            = 8
	// failureBurstSeconds: an address may save up this many seconds of
	// its failure budget.
	failureBurstSeconds = 10
)

// defaultInboundLimits returns the default limits. The two frame-byte
// bounds stay zero: they follow MaxMessageSize.
func defaultInboundLimits() InboundLimits {
	return InboundLimits{
		MaxConns:                defaultMaxConns,
		MaxConnsPerHost:         defaultMaxConnsPerHost,
		MaxHandshakes:           defaultMaxHandshakes,
		MaxHandshakesPerHost:    defaultMaxHandshakesPerHost,
		MemberReserve:           defaultMemberReserve,
		FirstByteTimeout:        defaultFirstByteTimeout,
		HandshakeTimeout:        defaultHandshakeTimeout,
		FailedHandshakesPerHost: defaultFailedPerHost,
		FailedHandshakes:        defaultFailed,
	}
}

// validate checks l for a transport whose MaxMessageSize is maxMsg.
func (l InboundLimits) validate(maxMsg int) error {
	if err := checkNonNegative("Inbound.",
		named[int]{"MaxConns", l.MaxConns},
		named[int]{"MaxConnsPerHost", l.MaxConnsPerHost},
		named[int]{"MaxHandshakes", l.MaxHandshakes},
		named[int]{"MaxHandshakesPerHost", l.MaxHandshakesPerHost},
		named[int]{"MemberReserve", l.MemberReserve},
		named[int]{"FailedHandshakesPerHost", l.FailedHandshakesPerHost},
		named[int]{"FailedHandshakes", l.FailedHandshakes},
		named[int]{"MaxFrameBytesPerConn", l.MaxFrameBytesPerConn},
		named[int]{"MaxFrameBytes", l.MaxFrameBytes},
	); err != nil {
		return err
	}
	if err := checkNonNegative("Inbound.",
		named[time.Duration]{"FirstByteTimeout", l.FirstByteTimeout},
		named[time.Duration]{"HandshakeTimeout", l.HandshakeTimeout},
	); err != nil {
		return err
	}
	d := l.withDefaults(maxMsg)
	switch {
	case d.MaxConnsPerHost > d.MaxConns:
		return fmt.Errorf("Inbound.MaxConnsPerHost %d exceeds Inbound.MaxConns %d", d.MaxConnsPerHost, d.MaxConns)
	case d.MaxHandshakes > d.MaxConns:
		return fmt.Errorf("Inbound.MaxHandshakes %d exceeds Inbound.MaxConns %d (a connection in its handshake is open)", d.MaxHandshakes, d.MaxConns)
	case d.MaxHandshakesPerHost > d.MaxHandshakes:
		return fmt.Errorf("Inbound.MaxHandshakesPerHost %d exceeds Inbound.MaxHandshakes %d", d.MaxHandshakesPerHost, d.MaxHandshakes)
	case d.FailedHandshakesPerHost > d.FailedHandshakes:
		return fmt.Errorf("Inbound.FailedHandshakesPerHost %d exceeds Inbound.FailedHandshakes %d", d.FailedHandshakesPerHost, d.FailedHandshakes)
	case d.MaxFrameBytesPerConn < maxMsg:
		return fmt.Errorf("Inbound.MaxFrameBytesPerConn %d is below MaxMessageSize %d (a request of that size could never be read)", d.MaxFrameBytesPerConn, maxMsg)
	case d.MaxFrameBytesPerConn > d.MaxFrameBytes:
		return fmt.Errorf("Inbound.MaxFrameBytesPerConn %d exceeds Inbound.MaxFrameBytes %d", d.MaxFrameBytesPerConn, d.MaxFrameBytes)
	}
	return nil
}

// withDefaults returns l with zero fields replaced by defaults, for a
// transport whose MaxMessageSize is maxMsg.
func (l InboundLimits) withDefaults(maxMsg int) InboundLimits {
	d := defaultInboundLimits()
	orDefault(&l.MaxConns, d.MaxConns)
	orDefault(&l.MaxConnsPerHost, d.MaxConnsPerHost)
	orDefault(&l.MaxHandshakes, d.MaxHandshakes)
	orDefault(&l.MaxHandshakesPerHost, d.MaxHandshakesPerHost)
	orDefault(&l.MemberReserve, d.MemberReserve)
	orDefault(&l.HandshakeTimeout, d.HandshakeTimeout)
	orDefault(&l.FirstByteTimeout, d.FirstByteTimeout)
	l.FirstByteTimeout = min(l.FirstByteTimeout, l.HandshakeTimeout)
	orDefault(&l.FailedHandshakesPerHost, d.FailedHandshakesPerHost)
	orDefault(&l.FailedHandshakes, d.FailedHandshakes)
	orDefault(&l.MaxFrameBytes, frameBytesFactor*maxMsg)
	orDefault(&l.MaxFrameBytesPerConn, max(min(frameBytesPerConnFactor*maxMsg, l.MaxFrameBytes), maxMsg))
	return l
}
