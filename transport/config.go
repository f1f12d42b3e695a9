package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Defaults applied by DefaultConfig and, for fields left zero, by New.
const (
	DefaultHandshakeTimeout  = 5 * time.Second
	DefaultRaftMaxPool       = 3
	DefaultRaftTimeout       = 10 * time.Second
	DefaultRPCConnsPerPeer   = 2
	DefaultMaxMessageSize    = 16 << 20
	DefaultKeepaliveInterval = 5 * time.Second
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

	// HandshakeTimeout bounds, for each accepted connection, the TLS
	// handshake plus the arrival of the protocol preface. Default 5s.
	HandshakeTimeout time.Duration

	// Listener, when set, is used instead of listening on BindAddr (tests,
	// memnet). The Transport owns it and closes it on Close.
	Listener net.Listener

	// Dialer opens connections to peers. Default: a net.Dialer over TCP.
	// It must honour ctx.
	Dialer func(ctx context.Context, addr string) (net.Conn, error)

	// Logger receives the transport's logs (rejected connections at Debug).
	// nil discards them.
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
	// ErrConnectionLost; writes that block for three intervals do the same.
	// Use the same value on every node: a server drops client connections
	// that stay silent for three of its own intervals. Default 5s.
	KeepaliveInterval time.Duration

	// testHookReject, when set, is called after a refused connection was
	// counted.
	testHookReject func(reason string)
}

// DefaultConfig returns a Config with every default filled in. BindAddr
// (or Listener) must still be set.
func DefaultConfig() Config {
	return Config{
		HandshakeTimeout:  DefaultHandshakeTimeout,
		RaftMaxPool:       DefaultRaftMaxPool,
		RaftTimeout:       DefaultRaftTimeout,
		RPCConnsPerPeer:   DefaultRPCConnsPerPeer,
		MaxMessageSize:    DefaultMaxMessageSize,
		KeepaliveInterval: DefaultKeepaliveInterval,
	}
}

// Validate reports the first problem with c, or nil. Zero values are valid
// (they mean "default").
func (c Config) Validate() error {
	if c.Listener == nil && c.BindAddr == "" {
		return errors.New("transport: config: BindAddr is empty and no Listener is set")
	}
	if c.Listener == nil {
		if _, _, err := net.SplitHostPort(c.BindAddr); err != nil {
			return fmt.Errorf("transport: config: BindAddr %q is not host:port: %v", c.BindAddr, err)
		}
	}
	if c.AdvertiseAddr != "" {
		if err := checkAdvertise(c.AdvertiseAddr); err != nil {
			return fmt.Errorf("transport: config: AdvertiseAddr: %w", err)
		}
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"HandshakeTimeout", c.HandshakeTimeout},
		{"RaftTimeout", c.RaftTimeout},
		{"KeepaliveInterval", c.KeepaliveInterval},
	} {
		if d.v < 0 {
			return fmt.Errorf("transport: config: %s must not be negative (got %v)", d.name, d.v)
		}
	}
	for _, n := range []struct {
		name string
		v    int
	}{
		{"RaftMaxPool", c.RaftMaxPool},
		{"RPCConnsPerPeer", c.RPCConnsPerPeer},
		{"MaxMessageSize", c.MaxMessageSize},
	} {
		if n.v < 0 {
			return fmt.Errorf("transport: config: %s must not be negative (got %d)", n.name, n.v)
		}
	}
	if c.MaxMessageSize > maxFrameLen {
		return fmt.Errorf("transport: config: MaxMessageSize %d exceeds the wire limit %d", c.MaxMessageSize, maxFrameLen)
	}
	if c.TLS != nil {
		if err := checkTLS(c.TLS); err != nil {
			return fmt.Errorf("transport: config: TLS: %w", err)
		}
	}
	return nil
}

// withDefaults returns c with zero fields replaced by defaults.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.HandshakeTimeout == 0 {
		c.HandshakeTimeout = d.HandshakeTimeout
	}
	if c.RaftMaxPool == 0 {
		c.RaftMaxPool = d.RaftMaxPool
	}
	if c.RaftTimeout == 0 {
		c.RaftTimeout = d.RaftTimeout
	}
	if c.RPCConnsPerPeer == 0 {
		c.RPCConnsPerPeer = d.RPCConnsPerPeer
	}
	if c.MaxMessageSize == 0 {
		c.MaxMessageSize = d.MaxMessageSize
	}
	if c.KeepaliveInterval == 0 {
		c.KeepaliveInterval = d.KeepaliveInterval
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Dialer == nil {
		var nd net.Dialer
		c.Dialer = func(ctx context.Context, addr string) (net.Conn, error) {
			return nd.DialContext(ctx, "tcp", addr)
		}
	}
	return c
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
