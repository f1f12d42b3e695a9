package fsm

import (
	"errors"
	"testing"
	"time"

	"github.com/raftlock/raftlock/internal/fsmwire"
)

// atV3 returns a harness at cluster version 3.
func atV3(t tb) *harness {
	t.Helper()
	h := newHarness(t)
	wantStatus(t, "set version", h.do(SetClusterVersion{Version: 3}), fsmwire.StatusOK)
	h.rec.take()
	return h
}

func TestRevokeHandsTheLockToTheNextWaiterWithAHigherToken(t *testing.T) {
	h := atV3(t)
	a := h.open(10*time.Second, 0, "holder")
	b := h.open(10*time.Second, 0, "waiter")
	g := h.do(Acquire{Session: a, Lock: "x", Owner: owner(1)})
	h.do(Acquire{Session: a, Lock: "y", Owner: owner(2)})
	wantStatus(t, "queue", h.do(Acquire{Session: b, Lock: "x", Owner: owner(3), Wait: true}), fsmwire.StatusQueued)
	h.rec.take()

	r := h.do(Revoke{Lock: "x", Token: g.Token, By: "ops", Why: "stuck"})
	wantStatus(t, "revoke", r, fsmwire.StatusOK)
	if r.Token != g.Token {
		t.Fatalf("revoke result token %d, want %d", r.Token, g.Token)
	}
	next := wantHolder(t, h.f, "x", owner(3))
	if next.Token <= g.Token {
		t.Fatalf("next grant token %d not above the revoked %d", next.Token, g.Token)
	}
	ev := h.rec.take()
	if len(ev) != 2 || ev[0].Kind != fsmwire.EventReleased || ev[0].Reason != fsmwire.ReasonRevoked || ev[0].Owner != owner(1) || ev[0].Token != g.Token ||
		ev[1].Kind != fsmwire.EventGranted || !ev[1].FromQueue {
		t.Fatalf("events %+v", ev)
	}
	// The holder's session lives on with its other lock.
	if _, ok := h.f.Session(a); !ok {
		t.Fatal("the revoked holder's session ended")
	}
	wantHolder(t, h.f, "y", owner(2))
	if names := h.f.SessionLocks(a); len(names) != 1 || names[0] != "y" {
		t.Fatalf("session locks after revoke %v", names)
	}
	// Its late release finds nothing to release.
	wantStatus(t, "late release", h.do(Release{Session: a, Lock: "x", Owner: owner(1)}), fsmwire.StatusNotHolder)
	checkInvariants(t, h.f)
}

func TestRevokeIsCompareAndRevoke(t *testing.T) {
	h := atV3(t)
	a := h.open(10*time.Second, 0, "a")
	g := h.do(Acquire{Session: a, Lock: "x", Owner: owner(1)})
	before := h.content()
	wantStatus(t, "wrong token", h.do(Revoke{Lock: "x", Token: g.Token + 1}), fsmwire.StatusNotHolder)
	wantStatus(t, "unknown lock", h.do(Revoke{Lock: "nope", Token: g.Token}), fsmwire.StatusNotHolder)
	if h.content() != before {
		t.Fatal("a refused revoke changed the state")
	}
	wantStatus(t, "revoke", h.do(Revoke{Lock: "x", Token: g.Token}), fsmwire.StatusOK)
	wantFree(t, h.f, "x")
	// A retried revoke cannot end a later grant of the same lock.
	g2 := h.do(Acquire{Session: a, Lock: "x", Owner: owner(2)})
	wantStatus(t, "retried revoke", h.do(Revoke{Lock: "x", Token: g.Token}), fsmwire.StatusNotHolder)
	if hd := wantHolder(t, h.f, "x", owner(2)); hd.Token != g2.Token {
		t.Fatalf("holder token %d, want %d", hd.Token, g2.Token)
	}
	checkInvariants(t, h.f)
}

func TestRevokeKeepsTheHoldersLockDelay(t *testing.T) {
	h := atV3(t)
	a := h.open(10*time.Second, 2*time.Second, "delayed")
	b := h.open(10*time.Second, 0, "waiter")
	g := h.do(Acquire{Session: a, Lock: "x", Owner: owner(1)})
	h.do(Acquire{Session: b, Lock: "x", Owner: owner(2), Wait: true})
	h.rec.take()
	wantStatus(t, "revoke", h.do(Revoke{Lock: "x", Token: g.Token}), fsmwire.StatusOK)
	wantFree(t, h.f, "x")
	ev := h.rec.take()
	if len(ev) != 1 || ev[0].DelayFor != 2*time.Second || ev[0].DelayToken != g.Token {
		t.Fatalf("events %+v: want one release into a 2 s delay", ev)
	}
	wantStatus(t, "end delay", h.do(EndDelay{Delays: []DelayRef{{Lock: "x", Token: g.Token}}}), fsmwire.StatusOK)
	wantHolder(t, h.f, "x", owner(2))
	checkInvariants(t, h.f)
}

func TestRevokeNeedsClusterVersion3(t *testing.T) {
	h := newHarness(t)
	h.do(SetClusterVersion{Version: 2})
	a := h.open(10*time.Second, 0, "a")
	g := h.do(Acquire{Session: a, Lock: "x", Owner: owner(1)})
	before := h.content()
	wantStatus(t, "revoke at version 2", h.do(Revoke{Lock: "x", Token: g.Token}), fsmwire.StatusInvalid)
	if h.content() != before {
		t.Fatal("a refused revoke changed the state")
	}
	if NeedsVersion(Revoke{Lock: "x", Token: 1}) != 3 {
		t.Fatalf("NeedsVersion(Revoke) = %d", NeedsVersion(Revoke{Lock: "x", Token: 1}))
	}
	// An entry of version 2 cannot carry it: a replica of the previous
	// release never decodes a Revoke as something else.
	if _, err := appendEntryVersion(nil, Entry{Commands: []Command{Revoke{Lock: "x", Token: 1}}}, fsmwire.EntryV2); !errors.Is(err, fsmwire.ErrInvalidEntry) {
		t.Fatalf("version-2 encoding of a revoke: %v", err)
	}
	b, _ := EncodeEntry(Entry{Commands: []Command{Revoke{Lock: "x", Token: 1}}})
	b[0] = fsmwire.EntryV2
	if _, err := DecodeEntry(b); !errors.Is(err, fsmwire.ErrUnsupportedVersion) {
		t.Fatalf("op 40 in a version-2 entry: %v", err)
	}
}

func TestRevokeValidate(t *testing.T) {
	long := string(make([]byte, fsmwire.MaxDescriptionLen+1))
	for name, c := range map[string]Revoke{
		"no token":  {Lock: "x"},
		"no lock":   {Token: 1},
		"long by":   {Lock: "x", Token: 1, By: long},
		"bad why":   {Lock: "x", Token: 1, Why: "\xff"},
		"nul in lk": {Lock: "a\x00", Token: 1},
	} {
		if err := c.validate(); !errors.Is(err, fsmwire.ErrInvalidCommand) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// From cluster version 4 Revoke takes a shared grant by its token: a
// reader (the writer queued behind the readers is granted once the last
// one is revoked) or a semaphore's holder (its permits go to the request
// queued for them). The grant ends at once — only an exclusive grant's
// expiry starts a lock-delay — and its session lives on.
func TestRevokeTakesASharedGrant(t *testing.T) {
	h := atVersion(t, 4)
	r := h.open(10*time.Second, 2*time.Second, "readers")
	w := h.open(10*time.Second, 0, "writer")
	g1 := h.do(Acquire{Session: r, Lock: "rw", Owner: owner(1), Shared: true})
	g2 := h.do(Acquire{Session: r, Lock: "rw", Owner: owner(2), Shared: true})
	wantStatus(t, "writer waits", h.do(Acquire{Session: w, Lock: "rw", Owner: owner(3), Wait: true}), fsmwire.StatusQueued)
	p := h.do(Acquire{Session: r, Lock: "pool", Owner: owner(4), Limit: 3, Permits: 2})
	wantStatus(t, "permits wait", h.do(Acquire{Session: w, Lock: "pool", Owner: owner(5), Limit: 3, Permits: 2, Wait: true}), fsmwire.StatusQueued)
	h.rec.take()

	res := h.do(Revoke{Lock: "rw", Token: g1.Token, By: "ops", Why: "stuck reader"})
	wantStatus(t, "revoke reader 1", res, fsmwire.StatusOK)
	if res.Token != g1.Token {
		t.Fatalf("revoke result token %d, want %d", res.Token, g1.Token)
	}
	ev := h.rec.take()
	if len(ev) != 1 || ev[0].Kind != fsmwire.EventReleased || ev[0].Reason != fsmwire.ReasonRevoked || !ev[0].Shared || ev[0].Owner != owner(1) || ev[0].Token != g1.Token {
		t.Fatalf("events %+v", ev)
	}
	if li, _ := h.f.Lock("rw"); len(li.Shared) != 1 || li.Shared[0].Owner != owner(2) || len(li.Waiters) != 1 || li.Delayed {
		t.Fatalf("rw after revoking one reader: %+v", li)
	}
	wantStatus(t, "revoke reader 2", h.do(Revoke{Lock: "rw", Token: g2.Token}), fsmwire.StatusOK)
	if wr := wantHolder(t, h.f, "rw", owner(3)); wr.Token <= g2.Token {
		t.Fatalf("writer token %d not above the revoked %d", wr.Token, g2.Token)
	}
	wantStatus(t, "revoke permits", h.do(Revoke{Lock: "pool", Token: p.Token}), fsmwire.StatusOK)
	if li, _ := h.f.Lock("pool"); len(li.Shared) != 1 || li.Shared[0].Owner != owner(5) || li.Used != 2 {
		t.Fatalf("pool after revoking the permits: %+v", li)
	}
	wantStatus(t, "revoked again", h.do(Revoke{Lock: "pool", Token: p.Token}), fsmwire.StatusNotHolder)
	if _, ok := h.f.Session(r); !ok || len(h.f.SessionLocks(r)) != 0 {
		t.Fatalf("the revoked session: locks %v", h.f.SessionLocks(r))
	}
	checkInvariants(t, h.f)
}

// At cluster version 3 a shared grant's token answers not-holder and
// nothing changes, as version 3 applied it: old and new replicas agree
// during a rolling upgrade.
func TestRevokeOfASharedGrantNeedsClusterVersion4(t *testing.T) {
	h := atV3(t)
	r := h.open(10*time.Second, 0, "reader")
	g := h.do(Acquire{Session: r, Lock: "rw", Owner: owner(1), Shared: true})
	before := h.content()
	wantStatus(t, "revoke at version 3", h.do(Revoke{Lock: "rw", Token: g.Token}), fsmwire.StatusNotHolder)
	if h.content() != before {
		t.Fatal("a refused revoke changed the state")
	}
	wantStatus(t, "raise", h.do(SetClusterVersion{Version: 4}), fsmwire.StatusOK)
	wantStatus(t, "revoke at version 4", h.do(Revoke{Lock: "rw", Token: g.Token}), fsmwire.StatusOK)
	checkInvariants(t, h.f)
}
