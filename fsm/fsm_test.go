package fsm

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/lockinfo"
)

func TestOpenSessionIDsAreUniqueAndIncreasing(t *testing.T) {
	h := newHarness(t)
	a := h.open(time.Second, 0, "a")
	b := h.open(time.Second, 0, "b")
	h.do(CloseSession{Session: a})
	c := h.open(time.Second, 0, "c")
	if !(a < b && b < c) {
		t.Fatalf("ids %d %d %d not increasing", a, b, c)
	}
	// Several sessions in one entry still get distinct ids.
	rs := h.entry(OpenSession{TTL: time.Second}, OpenSession{TTL: time.Second})
	if rs[0].Session == rs[1].Session || rs[0].Session <= c {
		t.Fatalf("batched ids %d %d after %d", rs[0].Session, rs[1].Session, c)
	}
	if got := kinds(h.rec.take()); !slices.Contains(got, fsmwire.EventSessionOpened) {
		t.Fatalf("no session-opened event: %v", got)
	}
}

func TestInvalidCommandsChangeNothing(t *testing.T) {
	h := newHarness(t)
	s := h.open(time.Second, 0, "s")
	before := h.f.Stats()
	long := make([]byte, fsmwire.MaxLockNameLen+1)
	for i := range long {
		long[i] = 'x'
	}
	cases := []struct {
		name string
		c    Command
	}{
		{"zero TTL", OpenSession{TTL: 0}},
		{"negative TTL", OpenSession{TTL: -time.Second}},
		{"huge TTL", OpenSession{TTL: fsmwire.MaxTTL + 1}},
		{"negative lock-delay", OpenSession{TTL: time.Second, LockDelay: -1}},
		{"bad UTF-8 description", OpenSession{TTL: time.Second, Description: "\xff"}},
		{"empty lock name", Acquire{Session: s, Lock: "", Owner: owner(1)}},
		{"NUL in lock name", Acquire{Session: s, Lock: "a\x00b", Owner: owner(1)}},
		{"zero owner", Acquire{Session: s, Lock: "l", Owner: lockinfo.OwnerID{}}},
		{"zero session", Acquire{Session: 0, Lock: "l", Owner: owner(1)}},
		{"release zero owner", Release{Lock: "l"}},
		{"close zero session", CloseSession{}},
	}
	for _, tc := range cases {
		r := h.do(tc.c)
		wantStatus(t, tc.name, r, fsmwire.StatusInvalid)
		if !errors.Is(r.Err(), fsmwire.ErrInvalidCommand) || r.Reason == "" {
			t.Fatalf("%s: err %v reason %q", tc.name, r.Err(), r.Reason)
		}
	}
	if _, err := EncodeEntry(Entry{Commands: []Command{Acquire{Session: s, Lock: string(long), Owner: owner(1)}}}); err == nil {
		t.Fatal("encoding an over-long lock name succeeded")
	}
	after := h.f.Stats()
	after.Index, after.Clock = before.Index, before.Clock
	if after != before {
		t.Fatalf("state changed: %+v → %+v", before, after)
	}
}

func TestAcquireFreeHeldAndWait(t *testing.T) {
	h := newHarness(t)
	a := h.open(time.Second, 0, "node-a/worker")
	b := h.open(time.Second, 0, "node-b/worker")

	r := h.do(Acquire{Session: a, Lock: "invoice:1", Owner: owner(1)})
	wantStatus(t, "free", r, fsmwire.StatusGranted)
	if r.Token == 0 {
		t.Fatal("zero token")
	}
	r2 := h.do(Acquire{Session: b, Lock: "invoice:1", Owner: owner(2)})
	wantStatus(t, "held, no wait", r2, fsmwire.StatusLocked)
	if r2.Holder.Owner != owner(1) || r2.Holder.Description != "node-a/worker" || r2.Holder.Token != r.Token {
		t.Fatalf("locked result names holder %+v", r2.Holder)
	}
	if !errors.Is(r2.Err(), fsmwire.ErrLocked) {
		t.Fatalf("Err() = %v", r2.Err())
	}
	r3 := h.do(Acquire{Session: b, Lock: "invoice:1", Owner: owner(3), Wait: true})
	wantStatus(t, "held, wait", r3, fsmwire.StatusQueued)
	r4 := h.do(Acquire{Session: b, Lock: "invoice:1", Owner: owner(4), Wait: true})
	if r3.Position != 1 || r4.Position != 2 {
		t.Fatalf("positions %d %d, want 1 2", r3.Position, r4.Position)
	}
	li, _ := h.f.Lock("invoice:1")
	if len(li.Waiters) != 2 || li.Waiters[0].Owner != owner(3) || li.Waiters[1].Owner != owner(4) {
		t.Fatalf("waiters %+v", li.Waiters)
	}
	if st := h.f.Stats(); st.Held != 1 || st.Waiters != 2 || st.Locks != 1 || st.Sessions != 2 {
		t.Fatalf("stats %+v", st)
	}
}

func TestRetriedAcquireIsIdempotent(t *testing.T) {
	h := newHarness(t)
	a := h.open(time.Second, 0, "a")
	b := h.open(time.Second, 0, "b")
	g1 := h.do(Acquire{Session: a, Lock: "l", Owner: owner(1)})
	g2 := h.do(Acquire{Session: a, Lock: "l", Owner: owner(1), Wait: true})
	wantStatus(t, "retry of granted", g2, fsmwire.StatusGranted)
	if g2.Token != g1.Token {
		t.Fatalf("retry got token %d, first %d", g2.Token, g1.Token)
	}
	q1 := h.do(Acquire{Session: b, Lock: "l", Owner: owner(2), Wait: true})
	q2 := h.do(Acquire{Session: b, Lock: "l", Owner: owner(2), Wait: true})
	wantStatus(t, "retry of queued", q2, fsmwire.StatusQueued)
	if q1.Position != 1 || q2.Position != 1 {
		t.Fatalf("positions %d %d", q1.Position, q2.Position)
	}
	if st := h.f.Stats(); st.Waiters != 1 || st.LastToken != g1.Token {
		t.Fatalf("retry changed state: %+v", st)
	}
	// The same owner id from another session is refused.
	r := h.do(Acquire{Session: b, Lock: "l", Owner: owner(1)})
	wantStatus(t, "owner of another session", r, fsmwire.StatusInvalid)
}

func TestReleaseIsCompareAndDelete(t *testing.T) {
	h := newHarness(t)
	a := h.open(time.Second, 0, "a")
	b := h.open(time.Second, 0, "b")
	g := h.do(Acquire{Session: a, Lock: "l", Owner: owner(1)})
	h.do(Acquire{Session: b, Lock: "l", Owner: owner(2), Wait: true})
	h.rec.take()

	wantStatus(t, "release by non-owner", h.do(Release{Lock: "l", Owner: owner(9)}), fsmwire.StatusNotHolder)
	wantStatus(t, "release of unknown lock", h.do(Release{Lock: "nope", Owner: owner(1)}), fsmwire.StatusNotHolder)
	wantHolder(t, h.f, "l", owner(1))

	// The holder's release hands the lock to the waiter in the same entry.
	wantStatus(t, "release by owner", h.do(Release{Lock: "l", Owner: owner(1)}), fsmwire.StatusOK)
	nh := wantHolder(t, h.f, "l", owner(2))
	if nh.Token <= g.Token {
		t.Fatalf("next token %d not above %d", nh.Token, g.Token)
	}
	ev := h.rec.take()
	if got := kinds(ev); !slices.Equal(got, []fsmwire.EventKind{fsmwire.EventReleased, fsmwire.EventGranted}) {
		t.Fatalf("events %v", got)
	}
	if ev[0].Index != ev[1].Index || ev[0].Reason != fsmwire.ReasonOwner || ev[1].Owner != owner(2) || ev[1].Token != nh.Token || !ev[1].FromQueue {
		t.Fatalf("events %+v", ev)
	}
	// The old owner's late release cannot touch the new holder.
	r := h.do(Release{Lock: "l", Owner: owner(1)})
	wantStatus(t, "late release", r, fsmwire.StatusNotHolder)
	if !errors.Is(r.Err(), fsmwire.ErrNotHolder) {
		t.Fatalf("Err() = %v", r.Err())
	}
	wantHolder(t, h.f, "l", owner(2))

	// Releasing the last holder forgets the lock.
	h.do(Release{Lock: "l", Owner: owner(2)})
	if _, ok := h.f.Lock("l"); ok {
		t.Fatal("idle lock still present")
	}
	if st := h.f.Stats(); st.Locks != 0 || st.Held != 0 || st.Waiters != 0 {
		t.Fatalf("stats %+v", st)
	}
	for _, id := range []lockinfo.SessionID{a, b} {
		if s, _ := h.f.Session(id); s.Locks != 0 {
			t.Fatalf("session %d still tracks %d locks", id, s.Locks)
		}
	}
}

func TestReleaseOfWaiterDequeues(t *testing.T) {
	h := newHarness(t)
	a := h.open(time.Second, 0, "a")
	b := h.open(time.Second, 0, "b")
	h.do(Acquire{Session: a, Lock: "l", Owner: owner(1)})
	h.do(Acquire{Session: b, Lock: "l", Owner: owner(2), Wait: true})
	h.do(Acquire{Session: b, Lock: "l", Owner: owner(3), Wait: true})
	h.rec.take()
	wantStatus(t, "dequeue", h.do(Release{Lock: "l", Owner: owner(2)}), fsmwire.StatusOK)
	if ev := h.rec.take(); len(ev) != 1 || ev[0].Kind != fsmwire.EventDequeued || ev[0].Owner != owner(2) {
		t.Fatalf("events %+v", ev)
	}
	if got := h.f.Owner("l", owner(3)); got.Position != 1 {
		t.Fatalf("owner 3 at %+v, want position 1", got)
	}
	h.do(Release{Lock: "l", Owner: owner(1)})
	wantHolder(t, h.f, "l", owner(3))
	if got := h.f.Owner("l", owner(2)); got != (OwnerState{}) {
		t.Fatalf("dequeued owner still present: %+v", got)
	}
}

func TestFIFOSkipsWaitersOfEndedSessions(t *testing.T) {
	h := newHarness(t)
	a := h.open(time.Second, 0, "a")
	b := h.open(time.Second, 0, "b")
	c := h.open(time.Second, 0, "c")
	d := h.open(time.Second, 0, "d")
	h.do(Acquire{Session: a, Lock: "l", Owner: owner(1)})
	h.do(Acquire{Session: b, Lock: "l", Owner: owner(2), Wait: true})
	h.do(Acquire{Session: c, Lock: "l", Owner: owner(3), Wait: true})
	h.do(Acquire{Session: d, Lock: "l", Owner: owner(4), Wait: true})
	h.do(ExpireSessions{Sessions: []lockinfo.SessionID{b}})
	h.do(CloseSession{Session: c})
	h.do(Release{Lock: "l", Owner: owner(1)})
	wantHolder(t, h.f, "l", owner(4))
}

func TestCloseReleasesWithoutDelayExpireDelays(t *testing.T) {
	for _, tc := range []struct {
		name      string
		end       func(h *harness, s lockinfo.SessionID)
		wantDelay bool
	}{
		{"close", func(h *harness, s lockinfo.SessionID) { h.do(CloseSession{Session: s}) }, false},
		{"expire", func(h *harness, s lockinfo.SessionID) { h.do(ExpireSessions{Sessions: []lockinfo.SessionID{s}}) }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			a := h.open(time.Second, 5*time.Second, "a")
			b := h.open(time.Second, 0, "b")
			h.do(Acquire{Session: a, Lock: "l", Owner: owner(1)})
			h.do(Acquire{Session: a, Lock: "other", Owner: owner(5), Wait: true}) // a also holds "other"
			h.do(Acquire{Session: b, Lock: "l", Owner: owner(2), Wait: true})
			h.rec.take()
			tc.end(h, a)
			if _, ok := h.f.Session(a); ok {
				t.Fatal("session still present")
			}
			ev := h.rec.take()
			if tc.wantDelay {
				wantFree(t, h.f, "l")
				li, _ := h.f.Lock("l")
				if li.DelayUntil != h.now+int64(5*time.Second) {
					t.Fatalf("delay until %d, want %d", li.DelayUntil, h.now+int64(5*time.Second))
				}
				if end, ok := h.f.NextDelayEnd(); !ok || end != li.DelayUntil {
					t.Fatalf("NextDelayEnd %d %v", end, ok)
				}
				if ev[len(ev)-1].Kind != fsmwire.EventSessionExpired {
					t.Fatalf("events %v", kinds(ev))
				}
			} else {
				wantHolder(t, h.f, "l", owner(2))
				if ev[len(ev)-1].Kind != fsmwire.EventSessionClosed {
					t.Fatalf("events %v", kinds(ev))
				}
			}
			// "other" had no waiters: gone after a close, in lock-delay after an expiry.
			if li, ok := h.f.Lock("other"); ok != tc.wantDelay || (ok && (li.Held || li.DelayUntil == 0)) {
				t.Fatalf("lock 'other': present %v, %+v", ok, li)
			}
		})
	}
}

func TestLockDelayAndTick(t *testing.T) {
	h := newHarness(t)
	a := h.open(time.Second, 5*time.Second, "a")
	b := h.open(time.Second, 0, "b")
	c := h.open(time.Second, 0, "c")
	g := h.do(Acquire{Session: a, Lock: "l", Owner: owner(1)})
	h.do(ExpireSessions{Sessions: []lockinfo.SessionID{a}})

	// During the delay: no-wait acquire is refused with the delay end, waiting queues.
	r := h.do(Acquire{Session: b, Lock: "l", Owner: owner(2)})
	wantStatus(t, "during delay", r, fsmwire.StatusLocked)
	if r.DelayUntil == 0 || r.Holder.Session != 0 {
		t.Fatalf("locked result %+v", r)
	}
	wantStatus(t, "wait during delay", h.do(Acquire{Session: b, Lock: "l", Owner: owner(2), Wait: true}), fsmwire.StatusQueued)

	h.advance(4 * time.Second)
	if r := h.do(Tick{}); r.Count != 0 {
		t.Fatalf("tick before the end ended %d delays", r.Count)
	}
	wantFree(t, h.f, "l")

	h.advance(time.Second)
	if r := h.do(Tick{}); r.Count != 1 {
		t.Fatalf("tick at the end ended %d delays", r.Count)
	}
	nh := wantHolder(t, h.f, "l", owner(2))
	if nh.Token <= g.Token {
		t.Fatalf("token %d after %d", nh.Token, g.Token)
	}
	if _, ok := h.f.NextDelayEnd(); ok {
		t.Fatal("delay still pending")
	}
	_ = c
}

func TestAcquireAfterDelayEndServesWaitersFirst(t *testing.T) {
	h := newHarness(t)
	a := h.open(time.Second, time.Second, "a")
	b := h.open(time.Second, 0, "b")
	c := h.open(time.Second, 0, "c")
	h.do(Acquire{Session: a, Lock: "l", Owner: owner(1)})
	h.do(ExpireSessions{Sessions: []lockinfo.SessionID{a}})
	h.do(Acquire{Session: b, Lock: "l", Owner: owner(2), Wait: true})
	h.advance(2 * time.Second)
	// No Tick yet: the acquire itself notices the delay is over, but the
	// waiter that queued first gets the lock.
	r := h.do(Acquire{Session: c, Lock: "l", Owner: owner(3)})
	wantStatus(t, "after delay, queue not empty", r, fsmwire.StatusLocked)
	wantHolder(t, h.f, "l", owner(2))
}

func TestDelayedLockWithoutWaitersIsGrantedAfterDelay(t *testing.T) {
	h := newHarness(t)
	a := h.open(time.Second, time.Second, "a")
	b := h.open(time.Second, 0, "b")
	h.do(Acquire{Session: a, Lock: "l", Owner: owner(1)})
	h.do(ExpireSessions{Sessions: []lockinfo.SessionID{a}})
	h.advance(time.Second)
	wantStatus(t, "after delay", h.do(Acquire{Session: b, Lock: "l", Owner: owner(2)}), fsmwire.StatusGranted)
	if st := h.f.Stats(); st.Delayed != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestAcquireByUnknownOrEndedSession(t *testing.T) {
	h := newHarness(t)
	r := h.do(Acquire{Session: 42, Lock: "l", Owner: owner(1)})
	wantStatus(t, "unknown", r, fsmwire.StatusNoSession)
	if !errors.Is(r.Err(), fsmwire.ErrNoSession) {
		t.Fatalf("Err() %v", r.Err())
	}
	a := h.open(time.Second, 0, "a")
	h.do(ExpireSessions{Sessions: []lockinfo.SessionID{a}})
	wantStatus(t, "expired", h.do(Acquire{Session: a, Lock: "l", Owner: owner(1)}), fsmwire.StatusNoSession)
	wantStatus(t, "close expired", h.do(CloseSession{Session: a}), fsmwire.StatusNoSession)
	if r := h.do(ExpireSessions{Sessions: []lockinfo.SessionID{a, 77}}); r.Status != fsmwire.StatusOK || r.Count != 0 {
		t.Fatalf("expire unknown: %+v", r)
	}
	if _, ok := h.f.Lock("l"); ok {
		t.Fatal("refused acquire left a lock behind")
	}
}

func TestBatchAppliesInOrderWithDistinctTokens(t *testing.T) {
	h := newHarness(t)
	a := h.open(time.Second, 0, "a")
	b := h.open(time.Second, 0, "b")
	rs := h.entry(
		Acquire{Session: a, Lock: "l", Owner: owner(1)},
		Acquire{Session: b, Lock: "l", Owner: owner(2), Wait: true},
		Release{Lock: "l", Owner: owner(1)},
		Acquire{Session: a, Lock: "", Owner: owner(3)}, // invalid: does not disturb the others
		Release{Lock: "l", Owner: owner(2)},
		Acquire{Session: a, Lock: "l", Owner: owner(4)},
	)
	want := []fsmwire.Status{fsmwire.StatusGranted, fsmwire.StatusQueued, fsmwire.StatusOK, fsmwire.StatusInvalid, fsmwire.StatusOK, fsmwire.StatusGranted}
	for i, r := range rs {
		if r.Status != want[i] {
			t.Fatalf("result %d: %v, want %v", i, r.Status, want[i])
		}
	}
	ev := h.rec.take()
	var tokens []lockinfo.Token
	for _, e := range ev {
		if e.Kind == fsmwire.EventGranted {
			tokens = append(tokens, e.Token)
		}
	}
	if len(tokens) != 3 || !(tokens[0] < tokens[1] && tokens[1] < tokens[2]) {
		t.Fatalf("tokens in one entry: %v", tokens)
	}
	if rs[5].Token != tokens[2] {
		t.Fatalf("result token %d, event token %d", rs[5].Token, tokens[2])
	}
}

func TestUndecodableEntryChangesNothing(t *testing.T) {
	h := newHarness(t)
	a := h.open(time.Second, 0, "a")
	h.do(Acquire{Session: a, Lock: "l", Owner: owner(1)})
	before := h.snapshot()
	for i, data := range [][]byte{nil, {1, 0, 1, 6, 0}, {1, 0, 0}, {2, 0, 1, 4, 1}} {
		resp := h.f.applyEntry(h.index, data) // same index: the state must be byte-identical
		if resp.Err == nil || !errors.Is(resp.Err, fsmwire.ErrInvalidEntry) || errors.Is(resp.Err, fsmwire.ErrUnsupportedVersion) || resp.Results != nil {
			t.Fatalf("case %d: %+v", i, resp)
		}
	}
	if after := h.snapshot(); string(after) != string(before) {
		t.Fatal("rejected entries changed the state")
	}
}

// An entry of an unknown version, or with a command its version does not
// define, is never skipped: the state machine halts before applying any of
// it and applies nothing after it.
func TestUnknownVersionHalts(t *testing.T) {
	future, _ := EncodeEntry(Entry{At: epoch, Commands: []Command{Noop{}, SetClusterVersion{Version: MaxClusterVersion + 1}}})
	for name, data := range map[string][]byte{
		"entry version 0":            {0, 0, 1, 7},
		"entry version 5":            {5, 0, 1, 7},
		"unknown op in version 1":    {1, 0, 1, 99},
		"version-2 op in a v1 entry": {1, 0, 1, byte(fsmwire.OpEndDelay), 0},
		"version-3 op in a v2 entry": {2, 0, 1, byte(fsmwire.OpRaiseTokens)},
		"version-4 op in a v3 entry": {3, 0, 1, byte(fsmwire.OpCloseLapsed), 1, 0, 0},
		"future cluster version":     future,
	} {
		t.Run(name, func(t *testing.T) {
			rec := &haltRecorder{}
			h := newHarness(t)
			h.f.obs, h.rec = rec, &rec.recorder
			a := h.open(time.Second, 0, "a")
			before, index := h.digest(), h.index
			h.index++
			resp := h.f.applyEntry(h.index, data)
			if !errors.Is(resp.Err, ErrHalted) || !errors.Is(resp.Err, fsmwire.ErrUnsupportedVersion) || resp.Results != nil {
				t.Fatalf("apply: %+v", resp)
			}
			if !errors.Is(h.f.Halted(), ErrHalted) || len(rec.halted) != 1 || rec.halted[0] != h.index {
				t.Fatalf("Halted() = %v, observer told %v", h.f.Halted(), rec.halted)
			}
			// Nothing after it applies; the applied index stays before it.
			h.index++
			b, _ := EncodeEntry(Entry{At: epoch, Commands: []Command{Acquire{Session: a, Lock: "l", Owner: owner(1)}}})
			if resp := h.f.applyEntry(h.index, b); !errors.Is(resp.Err, ErrHalted) {
				t.Fatalf("apply after the halt: %+v", resp)
			}
			if h.digest() != before || h.f.AppliedIndex() != index {
				t.Fatalf("the halted state changed (applied index %d, was %d)", h.f.AppliedIndex(), index)
			}
			if _, err := h.f.Snapshot(); !errors.Is(err, ErrHalted) {
				t.Fatalf("snapshot while halted: %v", err)
			}
			if len(rec.applied) != 1 { // the OpenSession only
				t.Fatalf("observer told of %d applied entries", len(rec.applied))
			}
		})
	}
}

func TestClockNeverGoesBack(t *testing.T) {
	h := newHarness(t)
	a := h.open(time.Second, 0, "a")
	h.advance(time.Hour)
	h.do(Tick{})
	h.now = epoch // a new leader with a slow clock
	h.do(Acquire{Session: a, Lock: "l", Owner: owner(1)})
	if hd, _ := h.f.Holder("l"); hd.AcquiredAt != epoch+int64(time.Hour) {
		t.Fatalf("acquired at %d, want the highest time seen %d", hd.AcquiredAt, epoch+int64(time.Hour))
	}
}

func TestSessionHoldingAndWaitingOnOneLock(t *testing.T) {
	h := newHarness(t)
	a := h.open(time.Second, 0, "a")
	b := h.open(time.Second, 0, "b")
	h.do(Acquire{Session: a, Lock: "l", Owner: owner(1)})
	h.do(Acquire{Session: a, Lock: "l", Owner: owner(2), Wait: true})
	h.do(Acquire{Session: b, Lock: "l", Owner: owner(3), Wait: true})
	if s, _ := h.f.Session(a); s.Locks != 2 {
		t.Fatalf("session tracks %d acquisitions, want 2", s.Locks)
	}
	h.do(CloseSession{Session: a})
	wantHolder(t, h.f, "l", owner(3))
	if st := h.f.Stats(); st.Waiters != 0 || st.Held != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// Long queues switch to an owner index; their behaviour must not change.
func TestLongQueueKeepsFIFOAndIdempotency(t *testing.T) {
	h := newHarness(t)
	a := h.open(time.Second, 0, "a")
	b := h.open(time.Second, 0, "b")
	h.do(Acquire{Session: a, Lock: "l", Owner: owner(200)})
	const n = 40
	for i := 1; i <= n; i++ {
		s := a
		if i%3 == 0 {
			s = b
		}
		r := h.do(Acquire{Session: s, Lock: "l", Owner: owner(byte(i)), Wait: true})
		if r.Status != fsmwire.StatusQueued || r.Position != i {
			t.Fatalf("waiter %d: %+v", i, r)
		}
	}
	l := h.f.st.locks.get("l")
	if l.waiters.owners == nil {
		t.Fatal("long queue has no owner index")
	}
	// Retries keep their place; a new owner goes to the end.
	if r := h.do(Acquire{Session: a, Lock: "l", Owner: owner(20), Wait: true}); r.Position != 20 {
		t.Fatalf("retry: %+v", r)
	}
	if st := h.f.Stats(); st.Waiters != n {
		t.Fatalf("retry added a slot: %+v", st)
	}
	// Dequeue one from the middle, drop session b's waits, then drain.
	h.do(Release{Lock: "l", Owner: owner(10)})
	h.do(CloseSession{Session: b})
	var order []byte
	prev := owner(200)
	for {
		h.do(Release{Lock: "l", Owner: prev})
		hd, ok := h.f.Holder("l")
		if !ok {
			break
		}
		order = append(order, hd.Owner[0])
		prev = hd.Owner
	}
	var want []byte
	for i := 1; i <= n; i++ {
		if i%3 != 0 && i != 10 {
			want = append(want, byte(i))
		}
	}
	if !slices.Equal(order, want) {
		t.Fatalf("grant order %v, want %v", order, want)
	}
	if _, ok := h.f.Lock("l"); ok {
		t.Fatal("drained lock still present")
	}
}
