package fsm

import (
	"errors"
	"testing"
	"time"

	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/lockinfo"
)

// atVersion returns a harness at the given cluster version.
func atVersion(t *testing.T, v uint64) *harness {
	t.Helper()
	h := newHarness(t)
	wantStatus(t, "set version", h.do(SetClusterVersion{Version: v}), fsmwire.StatusOK)
	h.rec.take()
	return h
}

// lapseFixture opens a session a (lock-delay 2 s) that holds x, reads rw,
// holds permits of pool and waits for busy, and a session b that waits for
// x and holds busy; it returns a, b and a's token on x.
func lapseFixture(t *testing.T, h *harness) (a, b lockinfo.SessionID, tok lockinfo.Token) {
	t.Helper()
	a = h.open(10*time.Second, 2*time.Second, "lapsing")
	b = h.open(10*time.Second, 0, "other")
	tok = h.do(Acquire{Session: a, Lock: "x", Owner: owner(1)}).Token
	wantStatus(t, "read", h.do(Acquire{Session: a, Lock: "rw", Owner: owner(2), Shared: true}), fsmwire.StatusGranted)
	wantStatus(t, "permits", h.do(Acquire{Session: a, Lock: "pool", Owner: owner(3), Limit: 2, Permits: 2}), fsmwire.StatusGranted)
	wantStatus(t, "busy", h.do(Acquire{Session: b, Lock: "busy", Owner: owner(4)}), fsmwire.StatusGranted)
	wantStatus(t, "wait busy", h.do(Acquire{Session: a, Lock: "busy", Owner: owner(5), Wait: true}), fsmwire.StatusQueued)
	wantStatus(t, "wait x", h.do(Acquire{Session: b, Lock: "x", Owner: owner(6), Wait: true}), fsmwire.StatusQueued)
	h.rec.take()
	return a, b, tok
}

// A lapsed close applies exactly as the leader's expiry of the session: the
// same state (the exclusive grant in the session's lock-delay, the shared
// grants free, the wait dropped) and the same events. A plain close hands
// the lock on at once.
func TestLapsedCloseIsAnExpiry(t *testing.T) {
	lapsed, expired, closed := atVersion(t, 4), atVersion(t, 4), atVersion(t, 4)
	a, _, tok := lapseFixture(t, lapsed)
	lapseFixture(t, expired)
	lapseFixture(t, closed)

	wantStatus(t, "lapsed close", lapsed.do(CloseSession{Session: a, Seq: 1, Lapsed: true}), fsmwire.StatusOK)
	wantStatus(t, "expire", expired.do(ExpireSessions{Sessions: []lockinfo.SessionID{a}}), fsmwire.StatusOK)
	if lapsed.content() != expired.content() {
		t.Fatal("a lapsed close left another state than the session's expiry")
	}
	le, ee := lapsed.rec.take(), expired.rec.take()
	if len(le) != len(ee) {
		t.Fatalf("events %+v, expiry's %+v", le, ee)
	}
	for i := range le {
		le[i].Index, ee[i].Index = 0, 0
		if le[i] != ee[i] {
			t.Fatalf("event %d: %+v, expiry's %+v", i, le[i], ee[i])
		}
	}
	if le[len(le)-1].Kind != fsmwire.EventSessionExpired {
		t.Fatalf("last event %+v, want the session's expiry", le[len(le)-1])
	}
	wantFree(t, lapsed.f, "x")
	if li, _ := lapsed.f.Lock("x"); !li.Delayed || li.DelayFor != 2*time.Second || li.DelayToken != tok {
		t.Fatalf("x after the lapsed close: %+v, want it in a 2 s lock-delay", li)
	}
	// The delay ends only with the leader's EndDelay.
	wantStatus(t, "end delay", lapsed.do(EndDelay{Delays: []DelayRef{{Lock: "x", Token: tok}}}), fsmwire.StatusOK)
	wantHolder(t, lapsed.f, "x", owner(6))

	wantStatus(t, "close", closed.do(CloseSession{Session: a, Seq: 1}), fsmwire.StatusOK)
	wantHolder(t, closed.f, "x", owner(6))
	for _, h := range []*harness{lapsed, expired, closed} {
		checkInvariants(t, h.f)
	}
}

// A lapsed release ends one acquisition as the session's expiry would: an
// exclusive grant enters the lock-delay, a shared grant, permits or a wait
// end at once; the session lives on. A release of another session's
// acquisition is refused, as a plain one is.
func TestLapsedReleaseKeepsTheLockDelay(t *testing.T) {
	h := atVersion(t, 4)
	a, b, tok := lapseFixture(t, h)
	before := h.content()
	wantStatus(t, "someone else's", h.do(Release{Session: b, Lock: "x", Owner: owner(1), Lapsed: true}), fsmwire.StatusNotHolder)
	wantStatus(t, "unknown session", h.do(Release{Session: 99, Lock: "x", Owner: owner(1), Lapsed: true}), fsmwire.StatusNoSession)
	if h.content() != before {
		t.Fatal("a refused lapsed release changed the state")
	}
	wantStatus(t, "lapsed release", h.do(Release{Session: a, Lock: "x", Owner: owner(1), Seq: 1, Lapsed: true}), fsmwire.StatusOK)
	ev := h.rec.take()
	if len(ev) != 1 || ev[0].Kind != fsmwire.EventReleased || ev[0].Reason != fsmwire.ReasonSessionExpired || ev[0].DelayFor != 2*time.Second || ev[0].DelayToken != tok {
		t.Fatalf("events %+v: want one release into a 2 s lock-delay", ev)
	}
	if li, _ := h.f.Lock("x"); li.Held || !li.Delayed || len(li.Waiters) != 1 {
		t.Fatalf("x: %+v", li)
	}
	for _, c := range []Release{
		{Session: a, Lock: "rw", Owner: owner(2), Lapsed: true},
		{Session: a, Lock: "pool", Owner: owner(3), Lapsed: true},
		{Session: a, Lock: "busy", Owner: owner(5), Lapsed: true},
	} {
		wantStatus(t, c.Lock, h.do(c), fsmwire.StatusOK)
		if st := h.f.Owner(c.Lock, c.Owner); st.Held || st.Position != 0 {
			t.Fatalf("%s after a lapsed release: %+v", c.Lock, st)
		}
		if li, _ := h.f.Lock(c.Lock); li.Delayed {
			t.Fatalf("%s: a shared grant or a wait started a lock-delay: %+v", c.Lock, li)
		}
	}
	if _, ok := h.f.Session(a); !ok || len(h.f.SessionLocks(a)) != 0 {
		t.Fatalf("session a after its lapsed releases: locks %v", h.f.SessionLocks(a))
	}
	// Without a lock-delay a lapsed release is a release.
	wantStatus(t, "b's own", h.do(Release{Session: b, Lock: "busy", Owner: owner(4), Lapsed: true}), fsmwire.StatusOK)
	wantFree(t, h.f, "busy")
	if li, ok := h.f.Lock("busy"); ok {
		t.Fatalf("busy after b's lapsed release (no lock-delay): %+v", li)
	}
	checkInvariants(t, h.f)
}

// Below cluster version 4 the lapsed forms are refused by the state machine
// (an entry the node never writes: it downgrades them to the plain forms),
// need version 4, travel only in entries of version 4, and need their
// session.
func TestLapsedFormsNeedClusterVersion4(t *testing.T) {
	h := atVersion(t, 3)
	a, _, _ := lapseFixture(t, h)
	before := h.content()
	for _, c := range []Command{
		CloseSession{Session: a, Lapsed: true},
		Release{Session: a, Lock: "x", Owner: owner(1), Lapsed: true},
	} {
		wantStatus(t, c.op().String()+" at version 3", h.do(c), fsmwire.StatusInvalid)
		if h.content() != before {
			t.Fatalf("a refused %v changed the state", c.op())
		}
		if NeedsVersion(c) != 4 {
			t.Fatalf("NeedsVersion(%v) = %d", c.op(), NeedsVersion(c))
		}
		if _, err := appendEntryVersion(nil, Entry{Commands: []Command{c}}, fsmwire.EntryV3); !errors.Is(err, fsmwire.ErrInvalidEntry) {
			t.Fatalf("version-3 encoding of %v: %v", c.op(), err)
		}
		b, _ := EncodeEntry(Entry{Commands: []Command{c}})
		if b[0] != fsmwire.EntryV4 {
			t.Fatalf("%v encoded in entry version %d", c.op(), b[0])
		}
		b[0] = fsmwire.EntryV3
		if _, err := DecodeEntry(b); !errors.Is(err, fsmwire.ErrUnsupportedVersion) {
			t.Fatalf("%v in a version-3 entry: %v", c.op(), err)
		}
		for v := uint64(1); v < 4; v++ {
			d := Downgrade(c, v)
			if d.op() == c.op() || NeedsVersion(d) > v {
				t.Fatalf("Downgrade(%v, %d) = %+v", c.op(), v, d)
			}
		}
		if d := Downgrade(c, 4); d != c {
			t.Fatalf("Downgrade(%v, 4) = %+v", c.op(), d)
		}
	}
	if err := (Release{Lock: "x", Owner: owner(1), Lapsed: true}).validate(); !errors.Is(err, fsmwire.ErrInvalidCommand) {
		t.Fatalf("a lapsed release without its session: %v", err)
	}
	if op := (CloseSession{Session: 1, Lapsed: true}).op(); op.LeaderOnly() || op.String() != "CloseSession(lapsed)" {
		t.Fatalf("op %v, leader-only %v", op, op.LeaderOnly())
	}
}
