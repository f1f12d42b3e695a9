package proc

import (
	"io"
	"net"
	"testing"
	"time"
)

// echoServer answers every connection by echoing it.
func echoServer(t *testing.T) (string, func()) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	return ln.Addr().String(), func() { ln.Close(); <-done }
}

func roundTrip(t *testing.T, c net.Conn, msg string) (string, error) {
	t.Helper()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte(msg)); err != nil {
		return "", err
	}
	buf := make([]byte, len(msg))
	_, err := io.ReadFull(c, buf)
	return string(buf), err
}

// The relay's figures are checked as lower bounds only (the machine is
// shared): a delayed link is never faster than its latency; a cut link
// carries nothing.
func TestRelayLatencyCutAndClear(t *testing.T) {
	target, stop := echoServer(t)
	defer stop()
	r, err := newRelay("127.0.0.1:0", target, 1, func(net.Addr) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	defer r.close()
	c, err := net.Dial("tcp", r.addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got, err := roundTrip(t, c, "ping"); err != nil || got != "ping" {
		t.Fatalf("plain relay: %q %v", got, err)
	}
	r.set("", linkFaults{Latency: 100 * time.Millisecond, Jitter: 50 * time.Millisecond}, linkFaults{Latency: 50 * time.Millisecond})
	start := time.Now()
	if got, err := roundTrip(t, c, "slow"); err != nil || got != "slow" {
		t.Fatalf("delayed relay: %q %v", got, err)
	}
	if rtt := time.Since(start); rtt < 150*time.Millisecond {
		t.Fatalf("round trip %v through 100+50 ms of latency", rtt)
	}
	r.set("", linkFaults{Cut: true}, linkFaults{})
	if _, err := roundTrip(t, c, "cut"); err == nil {
		t.Fatal("a cut link carried bytes")
	}
	if c2, err := net.Dial("tcp", r.addr()); err == nil {
		_, err := roundTrip(t, c2, "new")
		c2.Close()
		if err == nil {
			t.Fatal("a new connection over a cut link carried bytes")
		}
	}
	r.clear()
	c3, err := net.Dial("tcp", r.addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close()
	if got, err := roundTrip(t, c3, "back"); err != nil || got != "back" {
		t.Fatalf("after clear: %q %v", got, err)
	}
}
