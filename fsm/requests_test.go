package fsm

import (
	"errors"
	"testing"
	"time"

	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/lockinfo"
)

// Issue 14 #1: a delayed duplicate of an Acquire, delivered after the client
// released the grant, must not grant the lock again (the ghost holder).
func TestDelayedDuplicateAcquireAfterReleaseIsNotGranted(t *testing.T) {
	for _, tc := range []struct {
		name       string
		releaseAck uint64         // AckBelow of the Release: 2 = the Acquire is acknowledged
		want       fsmwire.Status // what the duplicate gets
	}{
		{"after the ack", 2, fsmwire.StatusStale},
		{"before the ack", 1, fsmwire.StatusGranted}, // the original result, and nothing changes
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			s := h.open(time.Minute, 0, "s")
			acq := Acquire{Session: s, Lock: "x", Owner: owner(1), Seq: 1, AckBelow: 1}
			g := h.do(acq)
			wantStatus(t, "acquire", g, fsmwire.StatusGranted)
			wantStatus(t, "release", h.do(Release{Session: s, Lock: "x", Owner: owner(1), Seq: 2, AckBelow: tc.releaseAck}), fsmwire.StatusOK)
			h.rec.take()

			dup := h.do(acq)
			wantStatus(t, "duplicate", dup, tc.want)
			if tc.want == fsmwire.StatusGranted && dup != g {
				t.Fatalf("duplicate got %+v, not the original %+v", dup, g)
			}
			wantFree(t, h.f, "x")
			if ev := h.rec.take(); len(ev) != 0 {
				t.Fatalf("the duplicate did something: %v", kinds(ev))
			}
			if si, _ := h.f.Session(s); si.Locks != 0 {
				t.Fatalf("session tracks %d acquisitions", si.Locks)
			}
		})
	}
}

// A withdrawn Lock (queued, then dequeued by its Release) whose Acquire is
// delivered again must not be queued again.
func TestDuplicateOfWithdrawnAcquireIsNotRequeued(t *testing.T) {
	h := newHarness(t)
	a := h.open(time.Minute, 0, "a")
	b := h.open(time.Minute, 0, "b")
	h.do(Acquire{Session: a, Lock: "x", Owner: owner(1), Seq: 1, AckBelow: 1})
	wait := Acquire{Session: b, Lock: "x", Owner: owner(2), Wait: true, Seq: 1, AckBelow: 1}
	wantStatus(t, "queue", h.do(wait), fsmwire.StatusQueued)
	wantStatus(t, "withdraw", h.do(Release{Session: b, Lock: "x", Owner: owner(2), Seq: 2, AckBelow: 1}), fsmwire.StatusOK)
	if r := h.do(wait); r.Status != fsmwire.StatusQueued || r.Position != 1 {
		t.Fatalf("duplicate before the ack: %+v, want the original result", r)
	}
	if li, _ := h.f.Lock("x"); len(li.Waiters) != 0 {
		t.Fatalf("duplicate re-queued: %+v", li.Waiters)
	}
	// The next request acknowledges both: the duplicate is now stale.
	wantStatus(t, "next", h.do(Acquire{Session: b, Lock: "y", Owner: owner(3), Seq: 3, AckBelow: 3}), fsmwire.StatusGranted)
	wantStatus(t, "duplicate after the ack", h.do(wait), fsmwire.StatusStale)
	h.do(Release{Session: a, Lock: "x", Owner: owner(1), Seq: 2, AckBelow: 2})
	wantFree(t, h.f, "x")
}

func TestExactlyOnceTable(t *testing.T) {
	h := newHarness(t)
	s := h.open(time.Minute, 0, "s")
	other := h.open(time.Minute, 0, "other")
	h.do(Acquire{Session: other, Lock: "busy", Owner: owner(9)})

	// A duplicate of a refused TryLock gets the refusal, even once the lock
	// is free: it never turns into a grant later.
	try := Acquire{Session: s, Lock: "busy", Owner: owner(1), Seq: 1, AckBelow: 1}
	wantStatus(t, "trylock", h.do(try), fsmwire.StatusLocked)
	h.do(Release{Lock: "busy", Owner: owner(9)})
	wantStatus(t, "duplicate trylock", h.do(try), fsmwire.StatusLocked)
	wantFree(t, h.f, "busy")

	// Reordered requests execute; each duplicate returns its own result.
	r3 := h.do(Acquire{Session: s, Lock: "c", Owner: owner(3), Seq: 3, AckBelow: 1})
	r2 := h.do(Acquire{Session: s, Lock: "b", Owner: owner(2), Seq: 2, AckBelow: 1})
	if r2.Token <= r3.Token || h.do(Acquire{Session: s, Lock: "c", Owner: owner(3), Seq: 3, AckBelow: 1}) != r3 {
		t.Fatalf("reordered requests: %+v %+v", r2, r3)
	}
	if got := len(h.f.st.sessions.get(s).results); got != 3 {
		t.Fatalf("%d results kept, want 3", got)
	}
	// The floor rises with AckBelow and never goes back; results below it
	// are dropped.
	h.do(Release{Session: s, Lock: "b", Owner: owner(2), Seq: 4, AckBelow: 4})
	if ss := h.f.st.sessions.get(s); ss.floor != 4 || len(ss.results) != 1 {
		t.Fatalf("floor %d, %d results; want 4 and 1", ss.floor, len(ss.results))
	}
	h.do(Release{Session: s, Lock: "c", Owner: owner(3), Seq: 5, AckBelow: 2}) // an older ack
	if ss := h.f.st.sessions.get(s); ss.floor != 4 {
		t.Fatalf("floor went back to %d", ss.floor)
	}
	r := h.do(Acquire{Session: s, Lock: "b", Owner: owner(2), Seq: 2, AckBelow: 1})
	if r.Status != fsmwire.StatusStale || !errors.Is(r.Err(), fsmwire.ErrStale) {
		t.Fatalf("request below the floor: %+v (%v)", r, r.Err())
	}

	// The window bounds what is outstanding: beyond floor + window, refused.
	h.do(SetLimits{Limits: Limits{RequestWindow: 8}})
	far := Acquire{Session: s, Lock: "far", Owner: owner(4), Seq: 4 + 8, AckBelow: 4}
	if r := h.do(far); r.Status != fsmwire.StatusQuota || r.Quota != fsmwire.QuotaRequests || !errors.Is(r.Err(), fsmwire.ErrQuota) {
		t.Fatalf("beyond the window: %+v", r)
	}
	if _, ok := h.f.Lock("far"); ok {
		t.Fatal("a refused request changed the state")
	}
	// ... unless its own acknowledgement moves the floor far enough.
	far.AckBelow = 6
	wantStatus(t, "acknowledged into the window", h.do(far), fsmwire.StatusGranted)

	// Invalid request numbers.
	for _, c := range []Command{
		Acquire{Session: s, Lock: "l", Owner: owner(5), Seq: 3, AckBelow: 4},
		Release{Lock: "l", Owner: owner(5), Seq: 3, AckBelow: 1}, // no session
		CloseSession{Session: s, Seq: 0, AckBelow: 1},
	} {
		wantStatus(t, "invalid request", h.do(c), fsmwire.StatusInvalid)
	}
}

func TestExactlyOnceCloseAndEndedSessions(t *testing.T) {
	h := newHarness(t)
	s := h.open(time.Minute, 0, "s")
	h.do(Acquire{Session: s, Lock: "x", Owner: owner(1), Seq: 1, AckBelow: 1})
	closeCmd := CloseSession{Session: s, Seq: 2, AckBelow: 2}
	wantStatus(t, "close", h.do(closeCmd), fsmwire.StatusOK)
	h.rec.take()
	// A duplicate close, or any request of the ended session, finds no
	// session and changes nothing (session ids are never reused).
	wantStatus(t, "duplicate close", h.do(closeCmd), fsmwire.StatusNoSession)
	wantStatus(t, "late acquire", h.do(Acquire{Session: s, Lock: "x", Owner: owner(1), Seq: 1, AckBelow: 1}), fsmwire.StatusNoSession)
	wantStatus(t, "late release", h.do(Release{Session: s, Lock: "x", Owner: owner(1), Seq: 3, AckBelow: 2}), fsmwire.StatusNoSession)
	if ev := h.rec.take(); len(ev) != 0 {
		t.Fatalf("requests of a closed session did something: %v", kinds(ev))
	}
	// A release naming the wrong session cannot touch another's lock.
	a := h.open(time.Minute, 0, "a")
	b := h.open(time.Minute, 0, "b")
	h.do(Acquire{Session: a, Lock: "y", Owner: owner(2)})
	wantStatus(t, "release by another session", h.do(Release{Session: b, Lock: "y", Owner: owner(2), Seq: 1, AckBelow: 1}), fsmwire.StatusNotHolder)
	wantHolder(t, h.f, "y", owner(2))
	// Expiry drops the session's table with it.
	h.do(ExpireSessions{Sessions: []lockinfo.SessionID{a}})
	wantStatus(t, "after expiry", h.do(Release{Session: a, Lock: "y", Owner: owner(2), Seq: 1, AckBelow: 1}), fsmwire.StatusNoSession)
}
