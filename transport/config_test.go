package transport

import (
	"crypto/tls"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

func TestConfigValidate(t *testing.T) {
	ca := newTestCA(t, "ca")
	good := ca.tlsConfig(t, "n")
	mod := func(f func(c *tls.Config)) *tls.Config { c := good.Clone(); f(c); return c }
	for _, tc := range []struct {
		name string
		cfg  Config
		want string // "" = valid
	}{
		{"defaults with bind", Config{BindAddr: "127.0.0.1:0"}, ""},
		{"DefaultConfig with bind", func() Config { c := DefaultConfig(); c.BindAddr = "127.0.0.1:7400"; return c }(), ""},
		{"plaintext on all interfaces", Config{BindAddr: ":7400"}, `plaintext bind on non-loopback address ":7400"`},
		{"plaintext on 0.0.0.0", Config{BindAddr: "0.0.0.0:7400"}, "plaintext bind on non-loopback address"},
		{"plaintext on a LAN address", Config{BindAddr: "10.213.0.5:7400"}, "set TLS (mutual TLS), or set AllowPlaintext"},
		{"plaintext on a host name", Config{BindAddr: "node-a.internal:7400"}, "plaintext bind on non-loopback address"},
		{"plaintext on localhost", Config{BindAddr: "localhost:7400"}, ""},
		{"plaintext on 127.0.0.2", Config{BindAddr: "127.0.0.2:7400"}, ""},
		{"plaintext on ::1", Config{BindAddr: "[::1]:7400"}, ""},
		{"plaintext allowed", Config{BindAddr: ":7400", AllowPlaintext: true}, ""},
		{"TLS on all interfaces", Config{BindAddr: ":7400", TLS: good}, ""},
		{"plaintext listener on a LAN address", Config{Listener: fakeListener{&net.TCPAddr{IP: net.IPv4(10, 0, 0, 1), Port: 7400}}}, "plaintext listener on non-loopback address 10.0.0.1:7400"},
		{"plaintext listener on loopback", Config{Listener: fakeListener{&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 7400}}}, ""},
		{"plaintext listener in memory", Config{Listener: fakeListener{fakeAddr("srv:7000")}}, ""},
		{"negative idle", Config{BindAddr: "127.0.0.1:0", RaftIdleTimeout: -1}, "RaftIdleTimeout must not be negative"},
		{"negative rpc idle", Config{BindAddr: "127.0.0.1:0", RPCIdleTimeout: -1}, "RPCIdleTimeout must not be negative"},
		{"negative max conns", Config{BindAddr: "127.0.0.1:0", Inbound: InboundLimits{MaxConns: -1}}, "Inbound.MaxConns must not be negative"},
		{"negative per host", Config{BindAddr: "127.0.0.1:0", Inbound: InboundLimits{MaxConnsPerHost: -1}}, "Inbound.MaxConnsPerHost must not be negative"},
		{"negative handshakes", Config{BindAddr: "127.0.0.1:0", Inbound: InboundLimits{MaxHandshakes: -1}}, "Inbound.MaxHandshakes must not be negative"},
		{"no bind, no listener", Config{}, "BindAddr is empty and no Listener is set"},
		{"bad bind", Config{BindAddr: "localhost"}, `BindAddr "localhost" is not host:port`},
		{"advertise unspecified", Config{BindAddr: ":0", AdvertiseAddr: "0.0.0.0:7400"}, "unspecified address"},
		{"advertise port 0", Config{BindAddr: ":0", AdvertiseAddr: "10.0.0.1:0"}, "non-zero port"},
		{"advertise no port", Config{BindAddr: ":0", AdvertiseAddr: "node-a"}, "is not host:port"},
		{"negative handshake", Config{BindAddr: ":0", Inbound: InboundLimits{HandshakeTimeout: -time.Second}}, "Inbound.HandshakeTimeout must not be negative (got -1s)"},
		{"negative raft timeout", Config{BindAddr: ":0", RaftTimeout: -1}, "RaftTimeout must not be negative"},
		{"negative keepalive", Config{BindAddr: ":0", KeepaliveInterval: -1}, "KeepaliveInterval must not be negative"},
		{"negative pool", Config{BindAddr: ":0", RaftMaxPool: -1}, "RaftMaxPool must not be negative (got -1)"},
		{"negative conns", Config{BindAddr: ":0", RPCConnsPerPeer: -2}, "RPCConnsPerPeer must not be negative"},
		{"message too big", Config{BindAddr: ":0", MaxMessageSize: 2 << 30}, "exceeds the wire limit"},
		{"tls ok", Config{BindAddr: ":0", TLS: good}, ""},
		{"tls insecure", Config{BindAddr: ":0", TLS: mod(func(c *tls.Config) { c.InsecureSkipVerify = true })}, "InsecureSkipVerify must be false"},
		{"tls no cert", Config{BindAddr: ":0", TLS: mod(func(c *tls.Config) { c.Certificates = nil })}, "no certificate"},
		{"tls no client CAs", Config{BindAddr: ":0", TLS: mod(func(c *tls.Config) { c.ClientCAs = nil })}, "ClientCAs is nil"},
		{"tls no root CAs", Config{BindAddr: ":0", TLS: mod(func(c *tls.Config) { c.RootCAs = nil })}, "RootCAs is nil"},
		{"tls max 1.1", Config{BindAddr: ":0", TLS: mod(func(c *tls.Config) { c.MinVersion = 0; c.MaxVersion = tls.VersionTLS11 })}, "below TLS 1.2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Validate() = %v, want nil", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Validate() = %v, want error containing %q", err, tc.want)
			case err != nil && (!strings.HasPrefix(err.Error(), "transport: invalid config: ") || !errors.Is(err, errInvalidConfig)):
				t.Fatalf("error does not wrap errInvalidConfig: %v", err)
			}
		})
	}
}

func TestNewErrors(t *testing.T) {
	if _, err := New(Config{}, nil); err == nil {
		t.Fatal("New accepted an empty config")
	}
	// Listening on 0.0.0.0 without AdvertiseAddr: peers could not dial it.
	if _, err := New(Config{BindAddr: "0.0.0.0:0", AllowPlaintext: true}, nil); err == nil || !strings.Contains(err.Error(), "set AdvertiseAddr") {
		t.Fatalf("New on 0.0.0.0 = %v", err)
	}
	if _, err := New(Config{BindAddr: "0.0.0.0:0", AdvertiseAddr: "127.0.0.1:7400"}, nil); err == nil || !strings.Contains(err.Error(), "plaintext bind") {
		t.Fatalf("New with plaintext on 0.0.0.0 = %v", err)
	}
	tr, err := New(Config{BindAddr: "0.0.0.0:0", AdvertiseAddr: "127.0.0.1:7400", AllowPlaintext: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if tr.Addr() != "127.0.0.1:7400" || tr.streamLayer().Addr().String() != "127.0.0.1:7400" {
		t.Fatalf("Addr = %s / %s", tr.Addr(), tr.streamLayer().Addr())
	}
	tr.Close()

	// Port in use.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if _, err := New(Config{BindAddr: ln.Addr().String()}, nil); err == nil {
		t.Fatal("New on a used port succeeded")
	}

	// Duplicate metrics registration fails cleanly; labelled registerers
	// tell transports apart.
	reg := prometheus.NewRegistry()
	regA := prometheus.WrapRegistererWith(prometheus.Labels{"node": "a"}, reg)
	tr1, err := New(Config{BindAddr: "127.0.0.1:0", Registerer: regA}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tr1.Close()
	var are prometheus.AlreadyRegisteredError
	if _, err := New(Config{BindAddr: "127.0.0.1:0", Registerer: regA}, nil); !errors.As(err, &are) {
		t.Fatalf("second registration = %v", err)
	}
	regB := prometheus.WrapRegistererWith(prometheus.Labels{"node": "b"}, reg)
	tr2, err := New(Config{BindAddr: "127.0.0.1:0", Registerer: regB}, nil)
	if err != nil {
		t.Fatalf("registerer with another label: %v", err)
	}
	tr2.Close()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if len(mfs) == 0 {
		t.Fatal("no metrics gathered")
	}
}

// fakeListener is a listener that only has an address (Validate looks at
// nothing else).
type fakeListener struct{ addr net.Addr }

func (l fakeListener) Accept() (net.Conn, error) { return nil, net.ErrClosed }
func (l fakeListener) Close() error              { return nil }
func (l fakeListener) Addr() net.Addr            { return l.addr }

type fakeAddr string

func (a fakeAddr) Network() string { return "memnet" }
func (a fakeAddr) String() string  { return string(a) }
