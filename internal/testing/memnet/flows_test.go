package memnet

import (
	"errors"
	"io"
	"os"
	"syscall"
	"testing"
	"testing/synctest"
	"time"
)

func TestSynctestFlowDelayOneConnection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := New()
		defer n.Close()
		c1, s1 := pair(t, n)
		defer c1.Close()
		defer s1.Close()
		c2, s2 := pair(t, n)
		defer c2.Close()
		defer s2.Close()
		c1.Write([]byte{0xA2, 1})
		c2.Write([]byte{0xA1, 1})
		buf := make([]byte, 2)
		io.ReadFull(s1, buf)
		io.ReadFull(s2, buf)

		flows := n.Flows(FlowFilter{From: "a", To: "b", Preface: []byte{0xA2}})
		if len(flows) != 1 || flows[0].Preface[0] != 0xA2 {
			t.Fatalf("flows with preface A2: %+v", flows)
		}
		if all := n.Flows(FlowFilter{}); len(all) != 2 || all[0].ID >= all[1].ID {
			t.Fatalf("all flows, oldest first: %+v", all)
		}
		if !n.DelayFlow(flows[0].ID, Forward, time.Second) {
			t.Fatal("DelayFlow: connection not found")
		}
		start := time.Now()
		c1.Write([]byte("r1"))
		c2.Write([]byte("r2"))
		if _, err := io.ReadFull(s2, buf); err != nil || time.Since(start) != 0 {
			t.Fatalf("undelayed connection: %v after %v", err, time.Since(start))
		}
		// The reply direction of the delayed connection is not delayed.
		s1.Write([]byte("ok"))
		if _, err := io.ReadFull(c1, buf); err != nil || time.Since(start) != 0 {
			t.Fatalf("backward direction: %v after %v", err, time.Since(start))
		}
		if _, err := io.ReadFull(s1, buf); err != nil || string(buf) != "r1" || time.Since(start) != time.Second {
			t.Fatalf("delayed request %q, %v after %v (want 1s)", buf, err, time.Since(start))
		}
		// Clearing keeps bytes in flight delayed, later ones go at once.
		c1.Write([]byte("r3"))
		n.ClearFlows()
		c1.Write([]byte("r4"))
		start = time.Now()
		io.ReadFull(s1, buf)
		if string(buf) != "r3" || time.Since(start) != time.Second {
			t.Fatalf("in-flight bytes after clear: %q after %v", buf, time.Since(start))
		}
		io.ReadFull(s1, buf)
		if string(buf) != "r4" || time.Since(start) != time.Second {
			t.Fatalf("bytes keep their order: %q after %v", buf, time.Since(start))
		}
	})
}

func TestSynctestFlowCutResetsOnClear(t *testing.T) {
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
		if n.DelayFlow(9999, Forward, time.Second) || n.CutFlow(9999, Forward) {
			t.Fatal("faults on an unknown connection")
		}
		n.CutFlow(id, Backward)
		if k, err := s1.Write([]byte("lost")); k != 4 || err != nil {
			t.Fatalf("write into a cut direction: %d, %v", k, err)
		}
		c1.Write([]byte("up"))
		buf := make([]byte, 2)
		if _, err := io.ReadFull(s1, buf); err != nil || string(buf) != "up" {
			t.Fatalf("other direction of a cut flow: %q %v", buf, err)
		}
		c1.SetReadDeadline(time.Now().Add(time.Second))
		if _, err := c1.Read(buf); err == nil {
			t.Fatal("read the cut direction")
		}
		if got := n.ClearFlows(); got != 1 {
			t.Fatalf("ClearFlows = %d, want 1", got)
		}
		c1.SetReadDeadline(time.Time{})
		if _, err := c1.Read(buf); !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("connection that lost bytes after clear: %v", err)
		}
		// The other connection is untouched.
		c2.Write([]byte("ok"))
		if _, err := io.ReadFull(s2, buf); err != nil {
			t.Fatal(err)
		}
	})
}

func TestSynctestByteDelayLeavesDialsAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := New()
		defer n.Close()
		n.SetByteDelay("b", "a", time.Second)
		start := time.Now()
		c, s := pair(t, n)
		defer c.Close()
		defer s.Close()
		if got := time.Since(start); got != 0 {
			t.Fatalf("dial took %v", got)
		}
		buf := make([]byte, 2)
		c.Write([]byte("up"))
		if _, err := io.ReadFull(s, buf); err != nil || time.Since(start) != 0 {
			t.Fatalf("a→b: %v after %v", err, time.Since(start))
		}
		s.Write([]byte("dn"))
		if _, err := io.ReadFull(c, buf); err != nil || time.Since(start) != time.Second {
			t.Fatalf("b→a: %v after %v, want 1s", err, time.Since(start))
		}
		n.SetByteDelay("b", "a", 0)
		s.Write([]byte("ok"))
		if _, err := io.ReadFull(c, buf); err != nil || time.Since(start) != time.Second {
			t.Fatalf("after removal: %v after %v", err, time.Since(start))
		}
	})
}

func TestSynctestCutDropsBytesInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := New()
		defer n.Close()
		c, s := pair(t, n)
		defer c.Close()
		defer s.Close()
		n.SetByteDelay("a", "b", time.Second)
		c.Write([]byte("lost"))
		time.Sleep(500 * time.Millisecond)
		n.Block("a", "b")
		n.Unblock("a", "b")
		s.SetReadDeadline(time.Now().Add(2 * time.Second))
		if _, err := s.Read(make([]byte, 4)); !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("read after a cut that caught bytes in flight: %v", err)
		}
	})
}

// CutFlows cuts the selected kind of connection, the live ones and those
// dialed later, from the dialer's first byte on; other connections and
// the other direction are untouched; ClearFlows lifts the rule.
func TestSynctestCutFlowsCoversNewConnections(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := New()
		defer n.Close()
		n.CutFlows(FlowFilter{From: "a", To: "b", Preface: []byte{0xA1}}, Forward)
		buf := make([]byte, 2)
		for round := range 2 { // a connection dialed after the rule, twice
			c, s := pair(t, n)
			if k, err := c.Write([]byte{0xA1, 1}); k != 2 || err != nil {
				t.Fatalf("round %d: write into a cut kind of connection: %d, %v", round, k, err)
			}
			s.SetReadDeadline(time.Now().Add(time.Second))
			if _, err := s.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("round %d: read of a cut connection: %v, want a timeout", round, err)
			}
			s.Write([]byte("ok")) // the backward direction is not cut
			if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "ok" {
				t.Fatalf("round %d: backward direction: %q %v", round, buf, err)
			}
			c.Close()
			s.Close()
		}
		other, os2 := pair(t, n) // another kind of connection
		defer other.Close()
		defer os2.Close()
		other.Write([]byte{0xA2, 1})
		if _, err := io.ReadFull(os2, buf); err != nil {
			t.Fatalf("a connection the rule does not select: %v", err)
		}
		n.ClearFlows()
		c, s := pair(t, n)
		defer c.Close()
		defer s.Close()
		c.Write([]byte{0xA1, 2})
		if _, err := io.ReadFull(s, buf); err != nil || buf[1] != 2 {
			t.Fatalf("after ClearFlows: %v %v", buf, err)
		}
	})
}
