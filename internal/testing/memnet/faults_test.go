package memnet

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"testing/synctest"
	"time"
)

// These tests run inside synctest bubbles: time is fake, so the exact
// durations below are asserted without any flakiness, and a test that would
// block forever fails with a deadlock report instead of hanging.

func TestSynctestReadDeadlineFiresOnFakeTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := New()
		defer n.Close()
		c, s := pair(t, n)
		defer c.Close()
		defer s.Close()
		start := time.Now()
		c.SetReadDeadline(start.Add(5 * time.Second))
		_, err := c.Read(make([]byte, 1))
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("read: %v", err)
		}
		if got := time.Since(start); got != 5*time.Second {
			t.Fatalf("deadline fired after %v, want 5s", got)
		}
		// Moving the deadline re-arms it; a write deadline is independent.
		s.SetWriteDeadline(time.Now().Add(time.Second))
		c.SetReadDeadline(time.Now().Add(time.Hour))
		go func() {
			time.Sleep(2 * time.Second)
			s.Write([]byte("x")) // past s's write deadline: must fail
			c.SetReadDeadline(time.Now())
		}()
		_, err = c.Read(make([]byte, 1))
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("read with moved deadline: %v", err)
		}
		if got := time.Since(start); got != 7*time.Second {
			t.Fatalf("moved deadline fired at %v, want 7s", got)
		}
	})
}

func TestSynctestPartitionTimesOutThenHealResets(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := New()
		defer n.Close()
		c, s := pair(t, n)
		defer c.Close()
		defer s.Close()

		n.Partition([]string{"a"}, []string{"b"})
		// Writes into the black hole succeed...
		if k, err := c.Write([]byte("ping")); err != nil || k != 4 {
			t.Fatalf("write during partition: %d, %v", k, err)
		}
		// ...but nothing arrives: the reader times out.
		s.SetReadDeadline(time.Now().Add(time.Second))
		if _, err := s.Read(make([]byte, 4)); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("read during partition: %v", err)
		}
		// A new dial hangs until its context ends.
		l, err := n.Host("b").Listen("b:2")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		start := time.Now()
		if _, err := n.Host("a").Dial(ctx, "b:2"); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("dial during partition: %v", err)
		}
		if got := time.Since(start); got != 3*time.Second {
			t.Fatalf("dial gave up after %v, want 3s", got)
		}

		n.Heal()
		// The connection lost bytes, so it is reset rather than resumed.
		s.SetReadDeadline(time.Time{})
		if _, err := s.Read(make([]byte, 4)); !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("read after heal: %v", err)
		}
		if _, err := c.Write([]byte("x")); !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("write after heal: %v", err)
		}
	})
}

func TestSynctestDialWaitsForHeal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := New()
		defer n.Close()
		l, err := n.Host("b").Listen("b:1")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		// A cut in the reverse direction also stops the handshake.
		n.Block("b", "a")
		type result struct {
			c   net.Conn
			err error
		}
		done := make(chan result, 1)
		go func() {
			c, err := n.Host("a").Dial(context.Background(), "b:1")
			done <- result{c, err}
		}()
		synctest.Wait()
		select {
		case r := <-done:
			t.Fatalf("dial finished during cut: %v", r.err)
		default:
		}
		n.Unblock("b", "a")
		r := <-done
		if r.err != nil {
			t.Fatal(r.err)
		}
		r.c.Close()
		s, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
	})
}

func TestSynctestOneWayBlockKeepsHealthyConns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := New()
		defer n.Close()
		c, s := pair(t, n)
		defer c.Close()
		defer s.Close()
		c2, s2 := pair(t, n)
		defer c2.Close()
		defer s2.Close()

		n.Block("b", "a")
		// a → b still flows.
		c.Write([]byte("up"))
		buf := make([]byte, 2)
		if _, err := io.ReadFull(s, buf); err != nil || string(buf) != "up" {
			t.Fatalf("a→b during b→a block: %q %v", buf, err)
		}
		// b → a is discarded on the first connection only.
		s.Write([]byte("down"))
		n.Unblock("b", "a")
		if _, err := c.Read(buf); !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("conn that lost bytes: %v", err)
		}
		// The second connection lost nothing and survives.
		s2.Write([]byte("ok"))
		if _, err := io.ReadFull(c2, buf); err != nil || string(buf) != "ok" {
			t.Fatalf("healthy conn after unblock: %q %v", buf, err)
		}
	})
}

func TestSynctestIsolateAndRejoin(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := New()
		defer n.Close()
		c, s := pair(t, n)
		defer c.Close()
		defer s.Close()
		n.Isolate("a")
		s.Write([]byte("lost"))
		c.SetReadDeadline(time.Now().Add(time.Second))
		if _, err := c.Read(make([]byte, 4)); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("read while isolated: %v", err)
		}
		n.Rejoin("a")
		c.SetReadDeadline(time.Time{})
		if _, err := c.Read(make([]byte, 4)); !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("read after rejoin: %v", err)
		}
	})
}

func TestSynctestDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := New()
		defer n.Close()
		l, err := n.Host("b").Listen("b:1")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		n.SetDelay("a", "b", 30*time.Millisecond)
		n.SetDelay("b", "a", 20*time.Millisecond)
		start := time.Now()
		c, err := n.Host("a").Dial(context.Background(), "b:1")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if got := time.Since(start); got != 50*time.Millisecond {
			t.Fatalf("dial took %v, want one round trip (50ms)", got)
		}
		s, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()

		start = time.Now()
		c.Write([]byte("one"))
		time.Sleep(10 * time.Millisecond)
		c.Write([]byte("two"))
		buf := make([]byte, 3)
		io.ReadFull(s, buf)
		if got := time.Since(start); got != 30*time.Millisecond || string(buf) != "one" {
			t.Fatalf("first chunk %q after %v, want one after 30ms", buf, got)
		}
		io.ReadFull(s, buf)
		if got := time.Since(start); got != 40*time.Millisecond || string(buf) != "two" {
			t.Fatalf("second chunk %q after %v, want two after 40ms", buf, got)
		}
		n.SetDelay("a", "b", 0)
		start = time.Now()
		c.Write([]byte("now"))
		io.ReadFull(s, buf)
		if got := time.Since(start); got != 0 {
			t.Fatalf("undelayed chunk took %v", got)
		}
	})
}

func TestSynctestBackpressure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := NewWithBuffer(4)
		defer n.Close()
		c, s := pair(t, n)
		defer c.Close()
		defer s.Close()
		wrote := make(chan error, 1)
		go func() {
			_, err := c.Write([]byte("0123456789"))
			wrote <- err
		}()
		synctest.Wait()
		select {
		case err := <-wrote:
			t.Fatalf("write of 10 bytes into a 4-byte buffer did not block: %v", err)
		default:
		}
		got, err := io.ReadAll(io.LimitReader(s, 10))
		if err != nil || string(got) != "0123456789" {
			t.Fatalf("read %q, %v", got, err)
		}
		if err := <-wrote; err != nil {
			t.Fatal(err)
		}
		// A blocked writer honours its write deadline.
		c.Write([]byte("full"))
		c.SetWriteDeadline(time.Now().Add(time.Second))
		if k, err := c.Write([]byte("more")); k != 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("blocked write: %d, %v", k, err)
		}
	})
}

func TestSynctestDropConns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := New()
		defer n.Close()
		c, s := pair(t, n)
		defer c.Close()
		defer s.Close()
		readErr := make(chan error, 1)
		go func() {
			_, err := c.Read(make([]byte, 1))
			readErr <- err
		}()
		synctest.Wait()
		if got := n.DropConns("c", ""); got != 0 {
			t.Fatalf("dropped %d conns of an unrelated host", got)
		}
		if got := n.DropConns("b", "a"); got != 1 {
			t.Fatalf("dropped %d conns, want 1", got)
		}
		if err := <-readErr; !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("blocked read after drop: %v", err)
		}
		if got := n.DropConns("a", ""); got != 0 {
			t.Fatalf("dropped %d conns twice", got)
		}
	})
}

func TestSynctestListenerCloseWakesAccept(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := New()
		defer n.Close()
		l, err := n.Host("b").Listen("b:1")
		if err != nil {
			t.Fatal(err)
		}
		// A connection queued but never accepted is reset by Close.
		c, err := n.Host("a").Dial(context.Background(), "b:1")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		l.Accept() // drain the queued one so Accept below blocks
		errc := make(chan error, 1)
		go func() {
			_, err := l.Accept()
			errc <- err
		}()
		synctest.Wait()
		c2, err := n.Host("a").Dial(context.Background(), "b:1")
		if err != nil {
			t.Fatal(err)
		}
		if err := <-errc; err != nil {
			t.Fatalf("accept: %v", err)
		}
		c2.Close()
		c3, err := n.Host("a").Dial(context.Background(), "b:1")
		if err != nil {
			t.Fatal(err)
		}
		defer c3.Close()
		l.Close()
		if _, err := c3.Read(make([]byte, 1)); !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("unaccepted conn after listener close: %v", err)
		}
		if _, err := l.Accept(); !errors.Is(err, net.ErrClosed) {
			t.Fatalf("accept after close: %v", err)
		}
	})
}
