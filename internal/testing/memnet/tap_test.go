package memnet

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"testing/synctest"
	"time"
)

// dialAccept dials l's address from host a and accepts the connection.
func dialAccept(t *testing.T, n *Network, l net.Listener) (client, server net.Conn) {
	t.Helper()
	client, err := n.Host("a").Dial(context.Background(), l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server, err = l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	return client, server
}

// A tap records the conversations of the connections it selects, dialed
// after it, even the bytes a cut lost; Replay sends one again on a fresh
// connection to the same address and holds it open until its ctx ends.
func TestSynctestTapReplaysConversation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := New()
		defer n.Close()
		l, err := n.Host("b").Listen("b:1")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		before, beforeS := dialAccept(t, n, l) // live before the tap: not recorded
		defer before.Close()
		defer beforeS.Close()

		tap := n.Tap(FlowFilter{From: "a", To: "b", Preface: []byte{0xA2}}, 1<<10)
		c, s := dialAccept(t, n, l)
		defer c.Close()
		defer s.Close()
		other, otherS := dialAccept(t, n, l) // another protocol: dropped
		defer other.Close()
		defer otherS.Close()
		before.Write([]byte{0xA2, 0})
		other.Write([]byte{0xA1, 1})
		conversation := []byte{0xA2, 2, 'h', 'i', 'r', 'e', 'q', '1'}
		c.Write(conversation[:2])
		c.Write(conversation[2:4])
		n.CutFlow(n.Flows(FlowFilter{Preface: []byte{0xA2, 2}})[0].ID, Forward)
		c.Write(conversation[4:]) // black-holed, still recorded
		buf := make([]byte, 4)
		if _, err := io.ReadFull(s, buf); err != nil || !bytes.Equal(buf, conversation[:4]) {
			t.Fatalf("original connection: %q, %v", buf, err)
		}
		tap.Stop()
		c.Write([]byte("after stop"))

		recs := tap.Recordings()
		if len(recs) != 1 || !bytes.Equal(recs[0].Data, conversation) || recs[0].From != "a" || recs[0].To != "b" || recs[0].Addr != "b:1" {
			t.Fatalf("recordings: %+v, want one of %q from a to b:1", recs, conversation)
		}

		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		type result struct {
			k   int
			err error
		}
		done := make(chan result, 1)
		start := time.Now()
		go func() {
			k, err := tap.Replay(ctx, recs[0].ID)
			done <- result{k, err}
		}()
		r, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		got := make([]byte, len(conversation))
		if _, err := io.ReadFull(r, got); err != nil || !bytes.Equal(got, conversation) {
			t.Fatalf("replayed conversation: %q, %v", got, err)
		}
		if _, err := r.Write([]byte("answer")); err != nil { // drained by Replay
			t.Fatalf("answer to the replay: %v", err)
		}
		if _, err := r.Read(buf); err != io.EOF || time.Since(start) != time.Second {
			t.Fatalf("replayed connection ended with %v after %v, want EOF after 1s", err, time.Since(start))
		}
		if res := <-done; res.k != len(conversation) || res.err != nil {
			t.Fatalf("Replay = %d, %v", res.k, res.err)
		}
		if _, err := tap.Replay(ctx, 9999); !errors.Is(err, ErrNotRecorded) {
			t.Fatalf("Replay of an unrecorded connection: %v", err)
		}
	})
}

// A recording is a prefix of the stream: it ends at the first write that
// does not fit the budget, even if a later one would.
func TestSynctestTapBudgetKeepsPrefix(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := New()
		defer n.Close()
		l, err := n.Host("b").Listen("b:1")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		tap := n.Tap(FlowFilter{}, 5)
		defer tap.Stop()
		c, s := dialAccept(t, n, l)
		defer c.Close()
		defer s.Close()
		for _, w := range []string{"ab", "cd", "efg", "h"} {
			c.Write([]byte(w))
		}
		c2, s2 := dialAccept(t, n, l)
		defer c2.Close()
		defer s2.Close()
		c2.Write([]byte("x")) // the budget is 1 byte short for "efg", enough for "x"
		recs := tap.Recordings()
		if len(recs) != 2 || string(recs[0].Data) != "abcd" || string(recs[1].Data) != "x" {
			t.Fatalf("recordings %+v, want abcd and x", recs)
		}
		// The listener's direction is never recorded.
		s.Write([]byte("reply"))
		if recs := tap.Recordings(); string(recs[0].Data) != "abcd" {
			t.Fatalf("after a reply: %q", recs[0].Data)
		}
	})
}

func TestSynctestResetFlow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := New()
		defer n.Close()
		c1, s1 := pair(t, n)
		defer c1.Close()
		defer s1.Close()
		c2, s2 := pair(t, n)
		defer c2.Close()
		defer s2.Close()
		id := n.Flows(FlowFilter{})[0].ID
		if !n.ResetFlow(id) || n.ResetFlow(id) || n.ResetFlow(9999) {
			t.Fatal("ResetFlow: a live connection once, then no more")
		}
		if _, err := s1.Read(make([]byte, 1)); !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("read on a reset connection: %v", err)
		}
		c2.Write([]byte("ok"))
		if _, err := io.ReadFull(s2, make([]byte, 2)); err != nil {
			t.Fatalf("the other connection: %v", err)
		}
	})
}
