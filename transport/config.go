package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Defaults applied by DefaultConfig and, for fields left zero, by New.
// (The inbound limits' defaults are in defaultInboundLimits.)
const (
	defaultRaftMaxPool       = 3
	defaultRaftTimeout       = 10 * time.Second
	defaultRPCConnsPerPeer   = 2
	defaultMaxMessageSize    = 16 << 20
	defaultKeepaliveInterval = 5 * time.Second
	defaultRaftIdleTimeout   = time.Minute
	defaultRPCIdleTimeout    = 2 * time.Minute
)

// Config configures a Transport. The zero value of every optional field
// means "default" (see DefaultConfig); negative durations and counts are
// invalid.
type Config struct {
	// BindAddr is the TCP address to listen on, e.g. "10.0.0.5:7400" or
	// "127.0.0.1:0". Ignored when Listener is set.
	BindAddr string

	// AdvertiseAddr is the "host:port" peers dial to reach this node; it is
	// also the node's Raft address. Default: the listener's actual address
	// (which must then not be an unspecified IP such as 0.0.0.0).
	AdvertiseAddr string

	// TLS enables mutual TLS on every connection, Raft and RPC, in both
	// directions when non-nil; nil means plaintext. There is no plaintext
	// fallback. The config is cloned; as a server the clone requires and
	// verifies client certificates against ClientCAs, as a client it
	// verifies the peer against RootCAs and presents Certificates. See
	// NewMutualTLSConfig and the package documentation for ServerName.
	TLS *tls.Config

	// AllowPlaintext admits a plaintext (TLS nil) listener on an address
	// other than loopback. Without TLS anyone who reaches the port can
	// speak Raft to the node; Validate refuses such a bind unless this is
	// set (e.g. inside an isolated network namespace or a private overlay
	// that authenticates peers itself). Loopback and in-memory listeners
	// never need it.
	AllowPlaintext bool

	// Identity, when set, turns on the hello (preface version 2): it is called
	// for every new connection, so its values may change over time.
	Identity func() Identity

	// CheckPeer, when set, vets the peer's Identity on inbound and outbound
	// connections. A non-nil error refuses the connection: the reason
	// (err.Error(), bounded) is sent to the peer before closing, the refusal is
	// counted (handshakes_rejected_total{reason="identity"}) and logged at Warn
	// once per peer and reason. It is not called for legacy (version 1)
	// peers, which send no Identity. It runs on the connection's set-up
	// goroutine, concurrently for several connections, and must not block.
	CheckPeer func(peer Identity, inbound bool) error

	// AcceptLegacy, when set and returning true, admits peers of the previous
	// release (preface version 1, no hello) — a rolling upgrade; outbound, a
	// peer that refuses version 2 with the version error is re-dialed with
	// version 1 (remembered per address for a while). Nil or false: refused.
	// Without Identity the transport speaks version 1 itself and admits
	// version 1 regardless.
	AcceptLegacy func() bool

	// RaftVoteGate, when set, is asked for every inbound RequestVote and
	// RequestPreVote before raft reads it; false refuses it: the
	// connection is closed with the request unread, and the candidate's
	// raft counts the failed RPC as a vote not granted (every other RPC on
	// every other connection passes untouched). It runs on the
	// connection's reader goroutine, once per vote request, and must not
	// block. Nil: every vote request reaches raft. A node uses it to keep
	// itself from voting while it is not a voter of its own configuration
	// (node's vote policy), without a hop between raft and its transport.
	RaftVoteGate func() bool

	// Listener, when set, is used instead of listening on BindAddr (tests,
	// memnet). The Transport owns it and closes it on Close.
	Listener net.Listener

	// Dialer opens connections to peers. It must honour ctx. Default: a
	// net.Dialer over TCP that, when the listener is bound to one IP (not
	// to every interface), dials peers' IPs of the same family and scope
	// (loopback or not) from it, so that they see connections come from the
	// address they know this node by (see MemberHost).
	Dialer func(ctx context.Context, addr string) (net.Conn, error)

	// MemberHost, when set, reports whether inbound connections from the
	// source address host (an IP, IPv4-mapped addresses as IPv4; on other
	// networks the remote address without its port) come from a member of
	// the cluster: such connections may use Inbound.MemberReserve, which
	// strangers never get. A node answers from the addresses of its Raft
	// configuration, static peers and gossip members, kept up to date as
	// they change. It is called for every accepted connection, on the
	// accept loop, and must not block. Nil: every source is a stranger.
	MemberHost func(host string) bool

	// Logger receives the transport's logs: rejected connections at Debug;
	// identity refusals (once per peer and reason) and reached connection
	// limits (at most every 10s) at Warn. nil discards them.
	Logger *slog.Logger

	// Registerer, when set, receives the transport's Prometheus metrics
	// (names start with "raftlock_transport_"). Registering two Transports
	// with one Registerer fails; wrap it with prometheus.WrapRegistererWith
	// to tell them apart.
	Registerer prometheus.Registerer

	// RaftMaxPool is the number of idle outbound connections per peer that
	// the raft.NetworkTransport built by RaftTransport keeps. Default 3.
	RaftMaxPool int

	// RaftTimeout is the I/O deadline the raft.NetworkTransport applies to
	// each Raft RPC (scaled up for InstallSnapshot). Default 10s.
	RaftTimeout time.Duration

	// RPCConnsPerPeer is the number of multiplexed connections Call keeps
	// per peer address; concurrent calls are spread over them. Default 2.
	RPCConnsPerPeer int

	// MaxMessageSize bounds a request or response payload in bytes.
	// Default 16 MiB.
	MaxMessageSize int

	// KeepaliveInterval is how often an RPC client connection pings its
	// peer. A connection on which nothing arrives for three intervals is
	// closed as dead (on both sides), failing its in-flight calls with
	// errConnectionLost; writes that block for three intervals do the same.
	// Use the same value on every node: a server drops client connections
	// that stay silent for three of its own intervals. Default 5s.
	KeepaliveInterval time.Duration

	// RaftIdleTimeout closes an inbound Raft connection on which nothing
	// arrives for this long, or to which a response cannot be written for
	// this long. Version-2 dialers send keepalives at a third of the
	// listener's value (announced in its hello), so a healthy peer's
	// connection is never cut, however long raft leaves it idle in its pool;
	// a legacy (version 1) peer's idle connection is cut, costing that peer
	// one failed Raft RPC and a re-dial. Default 1m.
	RaftIdleTimeout time.Duration

	// RPCIdleTimeout closes an outbound RPC connection on which no call was
	// made for this long (its pool slot is freed, and the address forgotten
	// when its last connection goes). Default 2m.
	RPCIdleTimeout time.Duration

	// Inbound bounds inbound connections and what they hold (see
	// InboundLimits). A connection beyond a connection or handshake bound
	// is closed as soon as it is accepted, before anything is read or
	// allocated for it, and counted (handshakes_rejected_total{reason=
	// "conn_limit", "host_limit", "handshake_limit",
	// "host_handshake_limit" or "failure_limit"}). Outbound connections
	// are not counted.
	Inbound InboundLimits

	// testHookReject, when set, is called after a refused connection was
	// counted.
	testHookReject func(reason string)

	// legacyV1 makes the transport behave like the previous release (test
	// only): it dials version 1 and refuses version 2 as unsupported.
	legacyV1 bool
}

// DefaultConfig returns a Config with every default filled in. BindAddr
// (or Listener) must still be set.
func DefaultConfig() Config {
	return Config{
		Inbound:           defaultInboundLimits(),
		RaftMaxPool:       defaultRaftMaxPool,
		RaftTimeout:       defaultRaftTimeout,
		RPCConnsPerPeer:   defaultRPCConnsPerPeer,
		MaxMessageSize:    defaultMaxMessageSize,
		KeepaliveInterval: defaultKeepaliveInterval,
		RaftIdleTimeout:   defaultRaftIdleTimeout,
		RPCIdleTimeout:    defaultRPCIdleTimeout,
	}
}

// Validate reports the first problem with c, or nil; the error wraps
// errInvalidConfig. Zero values are valid (they mean "default"). New
// and node.Config.Validate check it.
func (c Config) Validate() error {
	if err := c.problem(); err != nil {
		return fmt.Errorf("%w: %w", errInvalidConfig, err)
	}
	return nil
}

// problem is check's finding, without the errInvalidConfig prefix.
func (c Config) problem() error {
	if c.Listener == nil && c.BindAddr == "" {
		return errors.New("BindAddr is empty and no Listener is set")
	}
	if c.Listener == nil {
		if _, _, err := net.SplitHostPort(c.BindAddr); err != nil {
			return fmt.Errorf("BindAddr %q is not host:port: %v", c.BindAddr, err)
		}
	}
	if c.AdvertiseAddr != "" {
		if err := checkAdvertise(c.AdvertiseAddr); err != nil {
			return fmt.Errorf("AdvertiseAddr: %w", err)
		}
	}
	if err := checkNonNegative("",
		named[time.Duration]{"RaftTimeout", c.RaftTimeout},
		named[time.Duration]{"KeepaliveInterval", c.KeepaliveInterval},
		named[time.Duration]{"RaftIdleTimeout", c.RaftIdleTimeout},
		named[time.Duration]{"RPCIdleTimeout", c.RPCIdleTimeout},
	); err != nil {
		return err
	}
	if err := checkNonNegative("",
		named[int]{"RaftMaxPool", c.RaftMaxPool},
		named[int]{"RPCConnsPerPeer", c.RPCConnsPerPeer},
		named[int]{"MaxMessageSize", c.MaxMessageSize},
	); err != nil {
		return err
	}
	if c.MaxMessageSize > maxFrameLen {
		return fmt.Errorf("MaxMessageSize %d exceeds the wire limit %d", c.MaxMessageSize, maxFrameLen)
	}
	maxMsg := c.MaxMessageSize
	if maxMsg == 0 {
		maxMsg = defaultMaxMessageSize
	}
	if err := c.Inbound.validate(maxMsg); err != nil {
		return err
	}
	if c.TLS != nil {
		if err := checkTLS(c.TLS); err != nil {
			return fmt.Errorf("TLS: %w", err)
		}
	}
	if c.TLS == nil && !c.AllowPlaintext {
		if err := checkPlaintextBind(c); err != nil {
			return fmt.Errorf("%w", err)
		}
	}
	return nil
}

// checkPlaintextBind refuses a plaintext listener that other machines can
// reach: a BindAddr whose host is not "localhost" or a loopback IP (an
// empty host or 0.0.0.0 means every interface), or a Listener on a
// non-loopback TCP address. Other listeners (memnet, Unix sockets) pass.
func checkPlaintextBind(c Config) error {
	const why = "without TLS anyone who can reach it can speak Raft to this node: set TLS (mutual TLS), or set AllowPlaintext if the network itself is trusted"
	if c.Listener != nil {
		if a, ok := c.Listener.Addr().(*net.TCPAddr); ok && !a.IP.IsLoopback() {
			return fmt.Errorf("plaintext listener on non-loopback address %s: %s", a, why)
		}
		return nil
	}
	host, _, _ := net.SplitHostPort(c.BindAddr)
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("plaintext bind on non-loopback address %q: %s", c.BindAddr, why)
}

// withDefaults returns c with zero fields replaced by defaults.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	orDefault(&c.RaftMaxPool, d.RaftMaxPool)
	orDefault(&c.RaftTimeout, d.RaftTimeout)
	orDefault(&c.RPCConnsPerPeer, d.RPCConnsPerPeer)
	orDefault(&c.MaxMessageSize, d.MaxMessageSize)
	orDefault(&c.KeepaliveInterval, d.KeepaliveInterval)
	orDefault(&c.RaftIdleTimeout, d.RaftIdleTimeout)
	orDefault(&c.RPCIdleTimeout, d.RPCIdleTimeout)
	c.Inbound = c.Inbound.withDefaults(c.MaxMessageSize)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Dialer == nil {
		c.Dialer = sourceDialer(c.sourceAddr())
	}
	return c
}

// sourceAddr is the IP the default Dialer dials from: the listener's IP
// when the listener (or BindAddr) names one other than the unspecified
// address; else invalid (the kernel's choice).
func (c Config) sourceAddr() netip.Addr {
	var ip netip.Addr
	switch {
	case c.Listener != nil:
		a, ok := c.Listener.Addr().(*net.TCPAddr)
		if !ok {
			return netip.Addr{}
		}
		ip, _ = netip.AddrFromSlice(a.IP)
		ip = ip.Unmap().WithZone(a.Zone)
	default:
		host, _, err := net.SplitHostPort(c.BindAddr)
		if err != nil {
			return netip.Addr{}
		}
		if ip, err = netip.ParseAddr(host); err != nil {
			return netip.Addr{}
		}
	}
	if !ip.IsValid() || ip.IsUnspecified() {
		return netip.Addr{}
	}
	return ip
}

// sourceDialer is the default Dialer: TCP, from src (when valid) to every
// IP destination of its family and scope (loopback to loopback, other to
// other) — peers recognise members by source address, and a node bound to
// 127.0.0.2 would otherwise reach its loopback peers from 127.0.0.1 — and
// from the kernel's choice to anything else (host names included).
func sourceDialer(src netip.Addr) func(ctx context.Context, addr string) (net.Conn, error) {
	var plain net.Dialer
	bound := net.Dialer{LocalAddr: &net.TCPAddr{IP: src.AsSlice(), Zone: src.Zone()}}
	return func(ctx context.Context, addr string) (net.Conn, error) {
		if src.IsValid() {
			if host, _, err := net.SplitHostPort(addr); err == nil {
				if dst, err := netip.ParseAddr(host); err == nil {
					dst = dst.Unmap()
					if dst.Is4() == src.Is4() && dst.IsLoopback() == src.IsLoopback() {
						return bound.DialContext(ctx, "tcp", addr)
					}
				}
			}
		}
		return plain.DialContext(ctx, "tcp", addr)
	}
}

// named is a config value and its field's name.
type named[T int | time.Duration] struct {
	name string
	v    T
}

// checkNonNegative reports the first of vals that is negative, naming it
// prefix + its name.
func checkNonNegative[T int | time.Duration](prefix string, vals ...named[T]) error {
	for _, n := range vals {
		if n.v < 0 {
			return fmt.Errorf("%s%s must not be negative (got %v)", prefix, n.name, n.v)
		}
	}
	return nil
}

// orDefault sets *v to d when *v is the zero value.
func orDefault[T comparable](v *T, d T) {
	var zero T
	if *v == zero {
		*v = d
	}
}

// checkAdvertise checks that addr is a dialable host:port.
func checkAdvertise(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q is not host:port: %v", addr, err)
	}
	if host == "" || port == "" || port == "0" {
		return fmt.Errorf("%q needs a host and a non-zero port", addr)
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		return fmt.Errorf("%q is an unspecified address that peers cannot dial", addr)
	}
	return nil
}
