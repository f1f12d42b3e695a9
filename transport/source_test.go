package transport

import (
	"context"
	"net"
	"net/netip"
	"testing"
)

// The default Dialer of a transport bound to one loopback IP dials its
// loopback peers from that IP (not from 127.0.0.1, the kernel's choice),
// so that they recognise it by the address they know it by.
func TestDefaultDialerDialsFromListenerIP(t *testing.T) {
	peer, err := net.Listen("tcp", "127.0.0.3:0")
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	for _, tc := range []struct {
		name string
		cfg  Config
		want string // source IP seen by the peer
	}{
		{"BindAddr", Config{BindAddr: "127.0.0.2:0"}, "127.0.0.2"},
		{"Listener", Config{Listener: mustListen(t, "127.0.0.4:0")}, "127.0.0.4"},
		{"every interface", Config{BindAddr: "0.0.0.0:0", AdvertiseAddr: "127.0.0.1:1", AllowPlaintext: true}, "127.0.0.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := startTransport(t, tc.cfg, nil)
			c, err := tr.cfg.Dialer(context.Background(), peer.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			in, err := peer.Accept()
			if err != nil {
				t.Fatal(err)
			}
			defer in.Close()
			if got := remoteHost(in); got != tc.want {
				t.Fatalf("peer sees the dial from %s, want %s", got, tc.want)
			}
		})
	}
}

func mustListen(t *testing.T, addr string) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// The bound source is used only for destinations of its family and scope.
func TestSourceAddr(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string // "" = none
	}{
		{Config{BindAddr: "10.0.0.5:7400"}, "10.0.0.5"},
		{Config{BindAddr: "[fd00::5]:7400"}, "fd00::5"},
		{Config{BindAddr: ":7400"}, ""},
		{Config{BindAddr: "0.0.0.0:7400"}, ""},
		{Config{BindAddr: "[::]:7400"}, ""},
		{Config{BindAddr: "node-a:7400"}, ""},
		{Config{Listener: fakeListener{fakeAddr("srv:7000")}}, ""},
		{Config{Listener: fakeListener{&net.TCPAddr{IP: net.IPv4(10, 0, 0, 6), Port: 1}}}, "10.0.0.6"},
	} {
		got := tc.cfg.sourceAddr()
		if (tc.want == "" && got.IsValid()) || (tc.want != "" && got != netip.MustParseAddr(tc.want)) {
			t.Errorf("sourceAddr(%+v) = %v, want %q", tc.cfg, got, tc.want)
		}
	}
}
