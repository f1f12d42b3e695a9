package gossipnet

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/raftlock/raftlock/internal/testing/memnet"
)

// pair returns two Stream transports on one in-memory network, advertised
// as 10.0.0.1:7946 and 10.0.0.2:7946.
func pair(t *testing.T) (a, b *Stream) {
	t.Helper()
	n := memnet.New()
	t.Cleanup(func() { n.Close() })
	mk := func(host string) *Stream {
		h := n.Host(host)
		ln, err := h.Listen(host + ":7946")
		if err != nil {
			t.Fatal(err)
		}
		s := NewStream(ln, h.Dial, time.Second, time.Second)
		t.Cleanup(func() { s.Shutdown() })
		if _, _, err := s.FinalAdvertiseAddr("", 0); err != nil {
			t.Fatal(err)
		}
		return s
	}
	return mk("10.0.0.1"), mk("10.0.0.2")
}

func TestStreamPacketCarriesSenderAddress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := pair(t)
		if _, err := a.WriteTo([]byte("ping"), "10.0.0.2:7946"); err != nil {
			t.Fatal(err)
		}
		var p *memberlist.Packet
		select {
		case p = <-b.PacketCh():
		case <-time.After(5 * time.Second):
			t.Fatal("packet not delivered")
		}
		if string(p.Buf) != "ping" || p.From.String() != "10.0.0.1:7946" {
			t.Fatalf("packet %q from %v, want \"ping\" from 10.0.0.1:7946", p.Buf, p.From)
		}
	})
}

func TestStreamConnectionBothWays(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := pair(t)
		c, err := a.DialTimeout("10.0.0.2:7946", time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		var s net.Conn
		select {
		case s = <-b.StreamCh():
		case <-time.After(5 * time.Second):
			t.Fatal("stream not accepted")
		}
		defer s.Close()
		go c.Write([]byte("hello"))
		buf := make([]byte, 5)
		if _, err := io.ReadFull(s, buf); err != nil || string(buf) != "hello" {
			t.Fatalf("read %q, %v", buf, err)
		}
	})
}

// An oversized packet is cut at MaxPacket; a connection that never says
// what it is, or says something else, is closed; neither reaches
// memberlist.
func TestStreamRefusesMalformedConnections(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := memnet.New()
		defer n.Close()
		h := n.Host("10.0.0.2")
		ln, err := h.Listen("10.0.0.2:7946")
		if err != nil {
			t.Fatal(err)
		}
		s := NewStream(ln, h.Dial, time.Second, time.Second)
		defer s.Shutdown()
		dial := func() net.Conn {
			c, err := n.Host("10.0.0.9").Dial(context.Background(), "10.0.0.2:7946")
			if err != nil {
				t.Fatal(err)
			}
			return c
		}
		silent, other := dial(), dial()
		defer silent.Close()
		defer other.Close()
		other.Write([]byte("x"))
		for _, c := range []net.Conn{silent, other} {
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := c.Read(make([]byte, 1)); err != io.EOF {
				t.Fatalf("connection left open (read: %v), want closed by the transport", err)
			}
		}

		big := dial()
		from := "10.0.0.9:7946"
		msg := append([]byte{'p', 0, byte(len(from))}, from...)
		msg = append(msg, bytes.Repeat([]byte{'z'}, MaxPacket+100)...)
		go func() { big.Write(msg); big.Close() }()
		select {
		case p := <-s.PacketCh():
			if len(p.Buf) != MaxPacket {
				t.Fatalf("packet of %d bytes delivered, want it cut at %d", len(p.Buf), MaxPacket)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("packet not delivered")
		}
		select {
		case c := <-s.StreamCh():
			t.Fatalf("a malformed connection became a stream: %v", c.RemoteAddr())
		default:
		}
	})
}

// After Shutdown a dial fails at once with the cancellation, instead of
// waiting out its timeout (closing a node never waits for an unreachable
// seed).
func TestNetShutdownEndsDials(t *testing.T) {
	nt, err := NewNet("127.0.0.1", 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	nt.Shutdown()
	if _, err := nt.DialTimeout("127.0.0.1:1", time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("dial after Shutdown: %v, want the cancellation", err)
	}
}
