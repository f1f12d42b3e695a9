package fsm

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/lockinfo"
)

// WouldQueue predicts what the Acquire does if it is the next command
// applied: true exactly when it joins the queue (refusals by a quota aside,
// which WouldQueue does not judge; a retry by a waiter only reports its
// place). Random Acquires and Releases of locks,
// shared locks and a semaphore, by owners of three sessions.
func TestWouldQueuePredictsTheQueue(t *testing.T) {
	h := newHarness(t)
	wantStatus(t, "version", h.do(SetClusterVersion{Version: 3}), fsmwire.StatusOK) // shared locks, semaphores
	sessions := []lockinfo.SessionID{
		h.open(time.Minute, 0, "a"), h.open(time.Minute, 0, "b"), h.open(time.Minute, 0, "c"),
	}
	rng := rand.New(rand.NewPCG(7, 11))
	var queued, predicted int
	for i := range 4000 {
		o := byte(rng.IntN(6)) // owner o belongs to session o%3
		s := sessions[int(o)%3]
		if rng.IntN(3) == 0 {
			h.do(Release{Session: s, Lock: []string{"x", "y", "sem"}[rng.IntN(3)], Owner: owner(o)})
			continue
		}
		c := Acquire{Session: s, Owner: owner(o), Wait: rng.IntN(4) != 0}
		switch rng.IntN(3) {
		case 0:
			c.Lock = "x"
		case 1:
			c.Lock, c.Shared = "y", rng.IntN(2) == 0
		default:
			c.Lock, c.Limit, c.Permits = "sem", 3, 1+rng.IntN(2)
		}
		if c.validate() != nil {
			continue // refused before it is proposed
		}
		want := h.f.WouldQueue(c)
		waiting := h.f.Owner(c.Lock, c.Owner).Position > 0 // a retry only reports its place
		r := h.do(c)
		if r.Status == fsmwire.StatusQuota {
			continue
		}
		if got := r.Status == fsmwire.StatusQueued && !waiting; got != want {
			t.Fatalf("command %d %+v: WouldQueue %v, but applied it was %v (already waiting: %v)", i, c, want, r.Status, waiting)
		}
		if want {
			predicted++
		}
		if r.Status == fsmwire.StatusQueued && !waiting {
			queued++
		}
	}
	if queued < 100 {
		t.Fatalf("only %d Acquires queued: the test does not exercise the queue", queued)
	}
	if predicted != queued {
		t.Fatalf("%d Acquires joined a queue, %d predicted", queued, predicted)
	}
}
