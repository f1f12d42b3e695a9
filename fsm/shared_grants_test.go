package fsm

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/lockinfo"
)

// v3 returns a harness at cluster version 3 with sessions a, b, c (b with
// a lock-delay).
func v3(t *testing.T) (*harness, lockinfo.SessionID, lockinfo.SessionID, lockinfo.SessionID) {
	t.Helper()
	h := newHarness(t)
	wantStatus(t, "version", h.do(SetClusterVersion{Version: 3}), fsmwire.StatusOK)
	return h, h.open(time.Second, 0, "a"), h.open(time.Second, time.Second, "b"), h.open(time.Second, 0, "c")
}

func read(s lockinfo.SessionID, lock string, o lockinfo.OwnerID) Acquire {
	return Acquire{Session: s, Lock: lock, Owner: o, Wait: true, Shared: true}
}

func write(s lockinfo.SessionID, lock string, o lockinfo.OwnerID) Acquire {
	return Acquire{Session: s, Lock: lock, Owner: o, Wait: true}
}

func permits(s lockinfo.SessionID, sem string, limit, n int, o lockinfo.OwnerID) Acquire {
	return Acquire{Session: s, Lock: sem, Owner: o, Wait: true, Limit: limit, Permits: n}
}

func sharedOwners(t *testing.T, f *FSM, name string) []lockinfo.OwnerID {
	t.Helper()
	li, _ := f.Lock(name)
	var out []lockinfo.OwnerID
	for _, g := range li.Shared {
		out = append(out, g.Owner)
	}
	return out
}

// Readers share the lock; a writer waits for them; a reader that comes
// after a waiting writer waits behind it (no writer starvation); when the
// writer is done the readers behind it are granted together, up to the
// next writer.
func TestReadersShareWritersWaitFIFO(t *testing.T) {
	h, a, b, c := v3(t)
	wantStatus(t, "r1", h.do(read(a, "rw", owner(1))), fsmwire.StatusGranted)
	wantStatus(t, "r2", h.do(read(b, "rw", owner(2))), fsmwire.StatusGranted)
	wantStatus(t, "w1", h.do(write(c, "rw", owner(3))), fsmwire.StatusQueued)
	if r := h.do(read(a, "rw", owner(4))); r.Status != fsmwire.StatusQueued || r.Position != 2 {
		t.Fatalf("a reader after a waiting writer: %+v", r)
	}
	wantStatus(t, "r5", h.do(read(b, "rw", owner(5))), fsmwire.StatusQueued)
	wantStatus(t, "w2", h.do(write(a, "rw", owner(6))), fsmwire.StatusQueued)
	wantStatus(t, "r7", h.do(read(c, "rw", owner(7))), fsmwire.StatusQueued)
	if r := h.do(Acquire{Session: c, Lock: "rw", Owner: owner(8), Shared: true}); r.Status != fsmwire.StatusLocked || r.Err() == nil {
		t.Fatalf("try-read behind a writer: %+v", r)
	}
	h.do(Release{Lock: "rw", Owner: owner(1)})
	wantFree(t, h.f, "rw") // r2 still reads
	h.rec.take()
	h.do(Release{Lock: "rw", Owner: owner(2)})
	w1 := wantHolder(t, h.f, "rw", owner(3))
	h.do(Release{Lock: "rw", Owner: owner(3)})
	if got := sharedOwners(t, h.f, "rw"); !slices.Equal(got, []lockinfo.OwnerID{owner(4), owner(5)}) {
		t.Fatalf("readers after the writer: %v", got)
	}
	li, _ := h.f.Lock("rw")
	if li.Shared[0].Token <= w1.Token || li.Shared[1].Token <= li.Shared[0].Token || !li.Shared[0].Shared {
		t.Fatalf("tokens: writer %d, readers %+v", w1.Token, li.Shared)
	}
	if len(li.Waiters) != 2 || li.Waiters[0].Owner != owner(6) || !li.Waiters[1].Shared {
		t.Fatalf("queue: %+v", li.Waiters)
	}
	h.do(CloseSession{Session: b}) // r5 goes with its session
	h.do(Release{Lock: "rw", Owner: owner(4)})
	w2 := wantHolder(t, h.f, "rw", owner(6))
	if w2.Token <= li.Shared[1].Token {
		t.Fatalf("writer token %d after reader %d", w2.Token, li.Shared[1].Token)
	}
	checkInvariants(t, h.f)
}

// A writer that leaves the head of the queue lets the readers behind it
// in; a large semaphore request that leaves lets the smaller ones in.
func TestWaiterLeavingTheHeadPromotesThoseBehind(t *testing.T) {
	h, a, b, c := v3(t)
	h.do(read(a, "rw", owner(1)))
	h.do(write(b, "rw", owner(2)))
	h.do(read(c, "rw", owner(3)))
	h.do(Release{Lock: "rw", Owner: owner(2)}) // the writer gives up
	if got := sharedOwners(t, h.f, "rw"); !slices.Equal(got, []lockinfo.OwnerID{owner(1), owner(3)}) {
		t.Fatalf("readers: %v", got)
	}

	wantStatus(t, "2 of 3", h.do(permits(a, "sem", 3, 2, owner(4))), fsmwire.StatusGranted)
	wantStatus(t, "3 of 3", h.do(permits(b, "sem", 3, 3, owner(5))), fsmwire.StatusQueued)
	wantStatus(t, "1 of 3", h.do(permits(c, "sem", 3, 1, owner(6))), fsmwire.StatusQueued) // fits, but FIFO
	h.do(Release{Session: b, Lock: "sem", Owner: owner(5)})
	if got := sharedOwners(t, h.f, "sem"); !slices.Equal(got, []lockinfo.OwnerID{owner(4), owner(6)}) {
		t.Fatalf("holders: %v", got)
	}
	checkInvariants(t, h.f)
}

// Weighted FIFO: a large request at the head is not starved by smaller
// ones; permits come back when a holder's session ends (expiry or close),
// with no lock-delay.
func TestSemaphoreWeightedFIFOAndSessionEnd(t *testing.T) {
	h, a, b, c := v3(t)
	wantStatus(t, "a1", h.do(permits(a, "sem", 4, 1, owner(1))), fsmwire.StatusGranted)
	wantStatus(t, "b2", h.do(permits(b, "sem", 4, 2, owner(2))), fsmwire.StatusGranted)
	wantStatus(t, "c4", h.do(permits(c, "sem", 4, 4, owner(3))), fsmwire.StatusQueued)
	wantStatus(t, "a1 more", h.do(permits(a, "sem", 4, 1, owner(4))), fsmwire.StatusQueued) // 1 free, but behind c
	if r := h.do(Acquire{Session: a, Lock: "sem", Owner: owner(5), Limit: 4, Permits: 1}); r.Status != fsmwire.StatusLocked || r.Count != 1 {
		t.Fatalf("try behind the queue: %+v", r)
	}
	h.do(Release{Lock: "sem", Owner: owner(1)})
	h.rec.take()
	h.do(ExpireSessions{Sessions: []lockinfo.SessionID{b}}) // b has a lock-delay: no matter for permits
	evs := h.rec.take()
	if li, _ := h.f.Lock("sem"); li.Used != 4 || len(li.Shared) != 1 || li.Shared[0].Owner != owner(3) || li.Delayed {
		t.Fatalf("after the expiry: %+v", li)
	}
	if got := kinds(evs); !slices.Equal(got, []fsmwire.EventKind{fsmwire.EventReleased, fsmwire.EventGranted, fsmwire.EventSessionExpired}) || evs[1].Permits != 4 || !evs[1].FromQueue {
		t.Fatalf("events %v %+v", got, evs)
	}
	h.do(CloseSession{Session: c})
	if li, _ := h.f.Lock("sem"); li.Used != 1 || li.Shared[0].Owner != owner(4) || len(li.Waiters) != 0 {
		t.Fatalf("after the close: %+v", li)
	}
	if st := h.f.Stats(); st.Semaphores != 1 || st.SemaphoreHolders != 1 || st.PermitsHeld != 1 {
		t.Fatalf("stats %+v", st)
	}
	h.do(CloseSession{Session: a})
	if _, ok := h.f.Lock("sem"); ok || h.f.Stats().Semaphores != 0 {
		t.Fatal("an idle semaphore is kept")
	}
	checkInvariants(t, h.f)
}

// The limit is part of the state: another limit, or another kind of
// acquisition of the name, gets StatusConflict and changes nothing; once
// idle, the name is free for any kind.
func TestConflictingKindsAndLimits(t *testing.T) {
	h, a, b, _ := v3(t)
	h.do(permits(a, "sem", 4, 1, owner(1)))
	h.do(write(a, "mutex", owner(2)))
	before := h.content()
	for name, c := range map[string]Acquire{
		"other limit":        permits(b, "sem", 5, 1, owner(3)),
		"lock on semaphore":  write(b, "sem", owner(3)),
		"read on semaphore":  read(b, "sem", owner(3)),
		"semaphore on mutex": permits(b, "mutex", 4, 1, owner(3)),
	} {
		r := h.do(c)
		if r.Status != fsmwire.StatusConflict || !errors.Is(r.Err(), fsmwire.ErrConflict) {
			t.Fatalf("%s: %+v", name, r)
		}
		if name == "other limit" && r.Count != 4 {
			t.Fatalf("%s: limit in force %d", name, r.Count)
		}
	}
	if h.content() != before {
		t.Fatal("a conflict changed the state")
	}
	h.do(Release{Lock: "sem", Owner: owner(1)})
	wantStatus(t, "new limit once idle", h.do(permits(b, "sem", 5, 5, owner(3))), fsmwire.StatusGranted)
	for name, c := range map[string]Acquire{
		"zero permits":    {Session: a, Lock: "x", Owner: owner(9), Limit: 2},
		"above the limit": permits(a, "x", 2, 3, owner(9)),
		"shared permits":  {Session: a, Lock: "x", Owner: owner(9), Limit: 2, Permits: 1, Shared: true},
		"huge limit":      permits(a, "x", fsmwire.MaxSemaphoreLimit+1, 1, owner(9)),
	} {
		if r := h.do(c); r.Status != fsmwire.StatusInvalid {
			t.Fatalf("%s: %+v", name, r)
		}
	}
	long := string(make([]byte, fsmwire.MaxValueLen+1))
	if (Acquire{Session: a, Lock: "x", Owner: owner(9), Value: long}).validate() == nil ||
		(SetValue{Session: a, Lock: "x", Owner: owner(9), Value: long}).validate() == nil {
		t.Fatal("a value over MaxValueLen is valid")
	}
	if _, err := EncodeEntry(Entry{Commands: []Command{SetValue{Session: a, Lock: "x", Owner: owner(9), Value: long}}}); !errors.Is(err, fsmwire.ErrInvalidEntry) {
		t.Fatalf("encoding a long value: %v", err)
	}
}

// Retried acquisitions report their status; a retry of another kind with
// the same owner id is refused.
func TestPrimitiveAcquisitionsAreIdempotent(t *testing.T) {
	h, a, b, _ := v3(t)
	g := h.do(read(a, "rw", owner(1)))
	if r := h.do(read(a, "rw", owner(1))); r.Status != fsmwire.StatusGranted || r.Token != g.Token {
		t.Fatalf("retried read: %+v", r)
	}
	if r := h.do(write(a, "rw", owner(1))); r.Status != fsmwire.StatusInvalid {
		t.Fatalf("a write with the reader's owner id: %+v", r)
	}
	h.do(permits(a, "sem", 2, 2, owner(2)))
	h.do(permits(b, "sem", 2, 1, owner(3)))
	if r := h.do(permits(b, "sem", 2, 1, owner(3))); r.Status != fsmwire.StatusQueued || r.Position != 1 {
		t.Fatalf("retried wait: %+v", r)
	}
	if r := h.do(permits(b, "sem", 2, 2, owner(3))); r.Status != fsmwire.StatusInvalid {
		t.Fatalf("a wait for other permits with the same owner id: %+v", r)
	}
	if r := h.do(permits(b, "sem", 2, 2, owner(2))); r.Status != fsmwire.StatusInvalid {
		t.Fatalf("another session's owner: %+v", r)
	}
	checkInvariants(t, h.f)
}

// Only an exclusive holder's expiry starts a lock-delay; a reader of a
// session with a lock-delay frees the lock at once.
func TestOnlyExclusiveExpiryDelays(t *testing.T) {
	h, a, b, _ := v3(t)
	h.do(read(b, "rw", owner(1)))
	h.do(write(a, "rw", owner(2)))
	h.do(ExpireSessions{Sessions: []lockinfo.SessionID{b}})
	wantHolder(t, h.f, "rw", owner(2))
	b2 := h.open(time.Second, time.Second, "b2")
	h.do(Release{Lock: "rw", Owner: owner(2)})
	h.do(write(b2, "rw", owner(3)))
	h.do(read(a, "rw", owner(4)))
	h.do(ExpireSessions{Sessions: []lockinfo.SessionID{b2}})
	li, _ := h.f.Lock("rw")
	if !li.Delayed || len(li.Shared) != 0 || len(li.Waiters) != 1 {
		t.Fatalf("after a writer's expiry: %+v", li)
	}
	h.do(EndDelay{Delays: []DelayRef{{Lock: "rw", Token: li.DelayToken}}})
	if got := sharedOwners(t, h.f, "rw"); !slices.Equal(got, []lockinfo.OwnerID{owner(4)}) {
		t.Fatalf("after the delay: %v", got)
	}
	checkInvariants(t, h.f)
}

// A grant carries the acquisition's value — also when granted from the
// queue — and SetValue replaces it, for holders only.
func TestValuesOnGrants(t *testing.T) {
	h, a, b, _ := v3(t)
	h.do(Acquire{Session: a, Lock: "leader", Owner: owner(1), Value: "a:7400"})
	if hd := wantHolder(t, h.f, "leader", owner(1)); hd.Value != "a:7400" {
		t.Fatalf("value %q", hd.Value)
	}
	h.do(Acquire{Session: b, Lock: "leader", Owner: owner(2), Wait: true, Value: "b:7400"})
	if r := h.do(SetValue{Session: b, Lock: "leader", Owner: owner(2), Value: "x"}); r.Status != fsmwire.StatusNotHolder {
		t.Fatalf("a waiter's SetValue: %+v", r)
	}
	if r := h.do(SetValue{Session: b, Lock: "leader", Owner: owner(1), Value: "x"}); r.Status != fsmwire.StatusNotHolder {
		t.Fatalf("SetValue of another session's grant: %+v", r)
	}
	h.rec.take()
	r := h.do(SetValue{Session: a, Lock: "leader", Owner: owner(1), Value: "a:7401"})
	if evs := h.rec.take(); r.Status != fsmwire.StatusOK || len(evs) != 1 || evs[0].Kind != fsmwire.EventValueSet || evs[0].Value != "a:7401" || evs[0].Token != r.Token {
		t.Fatalf("proclaim: %+v %+v", r, evs)
	}
	h.do(Release{Lock: "leader", Owner: owner(1)})
	evs := h.rec.take()
	if hd := wantHolder(t, h.f, "leader", owner(2)); hd.Value != "b:7400" || evs[1].Value != "b:7400" {
		t.Fatalf("granted from the queue: %+v %+v", hd, evs)
	}
	h.do(permits(a, "sem", 2, 1, owner(3)))
	h.do(SetValue{Session: a, Lock: "sem", Owner: owner(3), Value: "slot"})
	if li, _ := h.f.Lock("sem"); li.Shared[0].Value != "slot" {
		t.Fatalf("semaphore holder: %+v", li)
	}
	checkInvariants(t, h.f)
}

// RaiseTokens raises the counter to the entry's time in microseconds and
// never lowers it; grants continue above it.
func TestRaiseTokens(t *testing.T) {
	h, a, _, _ := v3(t)
	r := h.do(RaiseTokens{})
	if want := lockinfo.Token(h.now / 1000); r.Token != want || h.f.Stats().LastToken != want {
		t.Fatalf("raised to %d, want %d", r.Token, want)
	}
	g := h.do(write(a, "l", owner(1)))
	if g.Token != r.Token+1 {
		t.Fatalf("next grant %d", g.Token)
	}
	h.advance(-time.Hour) // a leader whose clock is behind
	if r := h.do(RaiseTokens{}); r.Token != g.Token {
		t.Fatalf("lowered to %d", r.Token)
	}
	h.now = -5
	if r := h.do(RaiseTokens{}); r.Token != g.Token {
		t.Fatalf("negative stamp: %d", r.Token)
	}
}

// Below cluster version 3 the commands of version 3 are refused by the
// state machine too, and change nothing.
func TestPrimitivesNeedClusterVersion3(t *testing.T) {
	h := newHarness(t)
	h.do(SetClusterVersion{Version: 2})
	a := h.open(time.Second, 0, "a")
	h.do(write(a, "l", owner(1)))
	before := h.content()
	for _, c := range []Command{
		read(a, "l", owner(2)), permits(a, "s", 2, 1, owner(3)), Acquire{Session: a, Lock: "v", Owner: owner(4), Value: "x"},
		SetValue{Session: a, Lock: "l", Owner: owner(1), Value: "x"}, RaiseTokens{},
	} {
		if NeedsVersion(c) != 3 {
			t.Fatalf("%T needs version %d", c, NeedsVersion(c))
		}
		if r := h.do(c); r.Status != fsmwire.StatusInvalid {
			t.Fatalf("%T%+v at version 2: %+v", c, c, r)
		}
	}
	if h.content() != before {
		t.Fatal("a refused command changed the state")
	}
	if fsmwire.OpSetValue.LeaderOnly() || !fsmwire.OpRaiseTokens.LeaderOnly() {
		t.Fatal("SetValue is a client command, RaiseTokens the leader's")
	}
}

// Restored from an older backup, a cluster's counter is behind tokens the
// old cluster granted after the backup; the first RaiseTokens of the
// restored cluster's leader puts it above them (for grants below one per
// microsecond).
func TestRaiseTokensAfterRestoringAnOlderBackup(t *testing.T) {
	h, a, _, _ := v3(t)
	h.do(RaiseTokens{})
	backup := h.snapshot()
	var newest lockinfo.Token
	for i := range 1000 { // the old cluster goes on granting after the backup
		h.advance(time.Millisecond)
		o := owner(byte(i%200 + 1))
		newest = h.do(write(a, "l", o)).Token
		h.do(Release{Lock: "l", Owner: o})
	}
	restored := &harness{t: t, f: New(nil), rec: &recorder{}, index: h.index, now: h.now + int64(time.Minute)}
	if err := restored.f.Restore(readCloser(backup)); err != nil {
		t.Fatal(err)
	}
	if restored.f.Stats().LastToken >= newest {
		t.Fatal("the backup is not older")
	}
	restored.do(RaiseTokens{}) // the restored cluster's first leader
	s := restored.open(time.Second, 0, "s")
	if g := restored.do(write(s, "l", owner(1))); g.Token <= newest {
		t.Fatalf("token %d after the restore, the old cluster granted %d", g.Token, newest)
	}
}
