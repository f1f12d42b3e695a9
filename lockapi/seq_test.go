package lockapi

import (
	"sync"
	"testing"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/lockinfo"
)

func TestSeqAllocAcknowledgesLowestUnfinished(t *testing.T) {
	var a seqAlloc
	if got := a.ackBelow(); got != 1 {
		t.Fatalf("fresh ackBelow %d, want 1", got)
	}
	s1, s2, s3 := a.next(), a.next(), a.next()
	if s1 != 1 || s2 != 2 || s3 != 3 {
		t.Fatalf("numbers %d %d %d", s1, s2, s3)
	}
	if got := a.ackBelow(); got != 1 {
		t.Fatalf("ackBelow %d with 1 open", got)
	}
	a.done(s2) // out of order: 1 still open
	if got := a.ackBelow(); got != 1 {
		t.Fatalf("ackBelow %d with 1 open", got)
	}
	a.done(s1)
	if got := a.ackBelow(); got != 3 {
		t.Fatalf("ackBelow %d, want 3", got)
	}
	a.done(s3)
	if got := a.ackBelow(); got != 4 {
		t.Fatalf("ackBelow %d with none open, want 4", got)
	}
	// A request's own ack never passes it (fsm refuses AckBelow > Seq).
	s4 := a.next()
	if ack := a.ackBelow(); ack > s4 {
		t.Fatalf("ackBelow %d beyond the open request %d", ack, s4)
	}
}

func TestSeqAllocConcurrent(t *testing.T) {
	var a seqAlloc
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 1000 {
				s := a.next()
				if ack := a.ackBelow(); ack > s {
					t.Errorf("ackBelow %d beyond open %d", ack, s)
				}
				a.done(s)
			}
		})
	}
	wg.Wait()
	if got := a.ackBelow(); got != 8001 {
		t.Fatalf("ackBelow %d after all done, want 8001", got)
	}
}

func TestWithRequestAttachesNumbers(t *testing.T) {
	o := lockinfo.OwnerID{1}
	for _, tc := range []struct{ in, want fsm.Command }{
		{fsm.Acquire{Session: 7, Lock: "l", Owner: o}, fsm.Acquire{Session: 7, Lock: "l", Owner: o, Seq: 5, AckBelow: 3}},
		{fsm.Release{Lock: "l", Owner: o}, fsm.Release{Session: 7, Lock: "l", Owner: o, Seq: 5, AckBelow: 3}},
		{fsm.CloseSession{Session: 7}, fsm.CloseSession{Session: 7, Seq: 5, AckBelow: 3}},
		{fsm.OpenSession{TTL: 1}, fsm.OpenSession{TTL: 1}},
	} {
		if got := withRequest(tc.in, 7, 5, 3); got != tc.want {
			t.Fatalf("withRequest(%+v) = %+v, want %+v", tc.in, got, tc.want)
		}
	}
}
