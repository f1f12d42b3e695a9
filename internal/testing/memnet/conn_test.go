package memnet

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/nettest"
)

// pair returns the two ends of a fresh connection from host a to host b.
func pair(t *testing.T, n *Network) (client, server net.Conn) {
	t.Helper()
	l, err := n.Host("b").Listen("b:1")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	client, err = n.Host("a").Dial(context.Background(), "b:1")
	if err != nil {
		t.Fatal(err)
	}
	server, err = l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	return client, server
}

// TestConnConformance runs the x/net conformance suite for net.Conn
// implementations (I/O, deadlines, concurrent use, close semantics).
func TestConnConformance(t *testing.T) {
	nettest.TestConn(t, func() (c1, c2 net.Conn, stop func(), err error) {
		n := New()
		c1, c2 = pair(t, n)
		return c1, c2, func() { c1.Close(); c2.Close(); n.Close() }, nil
	})
}

func TestBufferedBothWaysBeforeRead(t *testing.T) {
	n := New()
	defer n.Close()
	c, s := pair(t, n)
	// Both ends write before either reads: a synchronous pipe would deadlock.
	if _, err := c.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write([]byte("world")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 5)
	if _, err := io.ReadFull(s, buf); err != nil || string(buf) != "hello" {
		t.Fatalf("server read %q, %v", buf, err)
	}
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "world" {
		t.Fatalf("client read %q, %v", buf, err)
	}
}

func TestCloseSemantics(t *testing.T) {
	n := New()
	defer n.Close()
	c, s := pair(t, n)
	if _, err := c.Write([]byte("bye")); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("second close: %v", err)
	}
	// The peer drains what was written, then sees EOF.
	got, err := io.ReadAll(s)
	if err != nil || string(got) != "bye" {
		t.Fatalf("ReadAll = %q, %v", got, err)
	}
	if _, err := s.Write([]byte("x")); !errors.Is(err, syscall.EPIPE) {
		t.Fatalf("write to closed peer: %v", err)
	}
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("read after close: %v", err)
	}
	s.Close()
}

func TestDialAndListenErrors(t *testing.T) {
	n := New()
	defer n.Close()
	if _, err := n.Host("a").Dial(context.Background(), "nowhere:1"); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial without listener: %v", err)
	}
	l, err := n.Listen("b:0")
	if err != nil {
		t.Fatal(err)
	}
	if l.Addr().String() == "b:0" || l.Addr().Network() != NetworkName {
		t.Fatalf("port 0 not assigned: %v", l.Addr())
	}
	if _, err := n.Listen(l.Addr().String()); !errors.Is(err, syscall.EADDRINUSE) {
		t.Fatalf("duplicate listen: %v", err)
	}
	l.Close()
	if _, err := l.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("accept after close: %v", err)
	}
	if _, err := n.Host("a").Dial(context.Background(), l.Addr().String()); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial closed listener: %v", err)
	}
	// The address is free again.
	l2, err := n.Listen(l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	l2.Close()
	n.Close()
	if _, err := n.Listen("c:1"); !errors.Is(err, ErrNetworkClosed) {
		t.Fatalf("listen after close: %v", err)
	}
}

func TestPastDeadline(t *testing.T) {
	n := New()
	defer n.Close()
	c, s := pair(t, n)
	defer c.Close()
	defer s.Close()
	c.SetReadDeadline(time.Now().Add(-time.Second))
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	if !errors.Is(err, os.ErrDeadlineExceeded) || !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("read past deadline: %v", err)
	}
	// Clearing the deadline makes the conn usable again.
	c.SetReadDeadline(time.Time{})
	s.Write([]byte("k"))
	if _, err := c.Read(make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
}

func TestHostsOfConn(t *testing.T) {
	n := New()
	defer n.Close()
	c, s := pair(t, n)
	defer c.Close()
	defer s.Close()
	cc, sc := c.(*Conn), s.(*Conn)
	if cc.LocalHost() != "a" || cc.RemoteHost() != "b" || sc.LocalHost() != "b" || sc.RemoteHost() != "a" {
		t.Fatalf("hosts: %s→%s, %s→%s", cc.LocalHost(), cc.RemoteHost(), sc.LocalHost(), sc.RemoteHost())
	}
	if s.RemoteAddr().String() != c.LocalAddr().String() || c.RemoteAddr().String() != "b:1" {
		t.Fatalf("addrs: %v %v %v", c.LocalAddr(), c.RemoteAddr(), s.RemoteAddr())
	}
}
