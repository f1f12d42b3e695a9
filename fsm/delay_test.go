package fsm

import (
	"testing"
	"time"

	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/lockinfo"
)

// At cluster version 2 a lock-delay ends only with the leader's EndDelay for
// that very delay: no entry time — a day ahead, or back — ends or extends it.
func TestVersion2DelayEndsOnlyWithEndDelay(t *testing.T) {
	h := newHarness(t)
	h.do(SetClusterVersion{Version: 2})
	a := h.open(time.Second, 5*time.Second, "a")
	b := h.open(time.Second, 0, "b")
	g := h.do(Acquire{Session: a, Lock: "l", Owner: owner(1)})
	h.rec.take()
	h.do(ExpireSessions{Sessions: []lockinfo.SessionID{a}})
	ev := h.rec.take()
	if ev[0].Kind != fsmwire.EventReleased || ev[0].DelayFor != 5*time.Second || ev[0].DelayToken != g.Token || ev[0].DelayUntil != h.now+int64(5*time.Second) {
		t.Fatalf("release into delay: %+v", ev[0])
	}
	li, _ := h.f.Lock("l")
	if !li.Delayed || li.DelayFor != 5*time.Second || li.DelayToken != g.Token {
		t.Fatalf("lock %+v", li)
	}
	wantStatus(t, "wait", h.do(Acquire{Session: b, Lock: "l", Owner: owner(2), Wait: true}), fsmwire.StatusQueued)

	h.advance(24 * time.Hour) // the leader's wall clock a day ahead
	h.do(Tick{})
	wantStatus(t, "no-wait acquire a day later", h.do(Acquire{Session: b, Lock: "l", Owner: owner(3)}), fsmwire.StatusLocked)
	if r := h.do(EndDelay{Delays: []DelayRef{{Lock: "l", Token: g.Token + 1}, {Lock: "nope", Token: g.Token}}}); r.Count != 0 {
		t.Fatalf("EndDelay of other delays ended %d", r.Count)
	}
	wantFree(t, h.f, "l")
	if r := h.do(EndDelay{Delays: []DelayRef{{Lock: "l", Token: g.Token}}}); r.Count != 1 {
		t.Fatalf("EndDelay: %+v", r)
	}
	if nh := wantHolder(t, h.f, "l", owner(2)); nh.Token <= g.Token {
		t.Fatalf("token %d after %d", nh.Token, g.Token)
	}
	if d := h.f.DelayedLocks(); len(d) != 0 || h.f.Stats().Delayed != 0 {
		t.Fatalf("still delayed: %+v", d)
	}
	// A repeated EndDelay (a retried proposal) cannot end a later delay of
	// the same lock.
	h.do(ExpireSessions{Sessions: []lockinfo.SessionID{b}})
	c := h.open(time.Second, 5*time.Second, "c")
	g2 := h.do(Acquire{Session: c, Lock: "l", Owner: owner(4)})
	h.do(ExpireSessions{Sessions: []lockinfo.SessionID{c}})
	if r := h.do(EndDelay{Delays: []DelayRef{{Lock: "l", Token: g.Token}}}); r.Count != 0 {
		t.Fatal("a stale EndDelay ended the next delay")
	}
	if d := h.f.DelayedLocks(); len(d) != 1 || d[0].Token != g2.Token || d[0].For != 5*time.Second {
		t.Fatalf("delayed locks %+v", d)
	}
}

// At cluster version 2 entry time is informational and per entry: one
// far-future stamp does not move the time later entries see.
func TestVersion2TimeIsNotPoisonedByOneEntry(t *testing.T) {
	h := newHarness(t)
	h.do(SetClusterVersion{Version: 2})
	a := h.open(time.Minute, 0, "a")
	h.now += int64(24 * time.Hour)
	h.do(Noop{})
	h.now -= int64(24 * time.Hour)
	h.do(Acquire{Session: a, Lock: "l", Owner: owner(1)})
	if hd, _ := h.f.Holder("l"); hd.AcquiredAt != h.now {
		t.Fatalf("acquired at %d, want the entry's own time %d", hd.AcquiredAt, h.now)
	}
}

// Raising the cluster version carries the delays of version 1 over: each is
// timed afresh by the leader over what was left of it, and ends with
// EndDelay of token 0.
func TestUpgradeCarriesVersion1DelaysOver(t *testing.T) {
	h := newHarness(t)
	a := h.open(time.Second, 5*time.Second, "a")
	h.do(Acquire{Session: a, Lock: "l", Owner: owner(1)})
	h.do(ExpireSessions{Sessions: []lockinfo.SessionID{a}})
	h.advance(2 * time.Second)
	h.do(Noop{})
	h.do(SetClusterVersion{Version: 2})
	d := h.f.DelayedLocks()
	if len(d) != 1 || d[0].Lock != "l" || d[0].Token != 0 || d[0].For != 3*time.Second {
		t.Fatalf("delays after the upgrade: %+v", d)
	}
	h.advance(time.Hour)
	h.do(Tick{}) // version 2: no longer ends delays
	if len(h.f.DelayedLocks()) != 1 {
		t.Fatal("a Tick ended a delay at version 2")
	}
	if r := h.do(EndDelay{Delays: []DelayRef{d[0].DelayRef}}); r.Count != 1 {
		t.Fatalf("EndDelay: %+v", r)
	}
	if _, ok := h.f.Lock("l"); ok {
		t.Fatal("the lock is still there")
	}
}

// A version-1 lock-delay that is over ends inside the next acquisition of
// the lock; when that acquisition is then refused (the session's quota),
// the lock entry, idle now, is dropped rather than left listed with nothing
// in it. (The model test found it: 2 locks, model 1.)
func TestVersion1SettledDelayRefusedByQuotaLeavesNoEntry(t *testing.T) {
	h := newHarness(t)
	h.do(SetLimits{Limits: Limits{MaxLocksPerSession: 1}})
	delayed := h.open(time.Second, time.Second, "delayed")
	other := h.open(time.Minute, 0, "other")
	wantStatus(t, "acquire c", h.do(Acquire{Session: delayed, Lock: "c", Owner: owner(1)}), fsmwire.StatusGranted)
	h.do(ExpireSessions{Sessions: []lockinfo.SessionID{delayed}})
	wantStatus(t, "acquire a", h.do(Acquire{Session: other, Lock: "a", Owner: owner(2)}), fsmwire.StatusGranted)
	h.advance(3 * time.Second) // the delay of c is over, nothing has ended it
	if r := h.do(Acquire{Session: other, Lock: "c", Owner: owner(3)}); r.Status != fsmwire.StatusQuota {
		t.Fatalf("acquire c over the session's quota: %+v", r)
	}
	var names []string
	for _, li := range allLocks(h.f) {
		names = append(names, li.Name)
	}
	if len(names) != 1 || names[0] != "a" {
		t.Fatalf("locks %q, want [a]", names)
	}
	checkInvariants(t, h.f)
}
