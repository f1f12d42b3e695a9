package fsm

import (
	"errors"
	"testing"
	"time"
)

// atV3 returns a harness at cluster version 3.
func atV3(t *testing.T) *harness {
	t.Helper()
	h := newHarness(t)
	wantStatus(t, "set version", h.do(SetClusterVersion{Version: 3}), StatusOK)
	h.rec.take()
	return h
}

func TestRevokeHandsTheLockToTheNextWaiterWithAHigherToken(t *testing.T) {
	h := atV3(t)
	a := h.open(10*time.Second, 0, "holder")
	b := h.open(10*time.Second, 0, "waiter")
	g := h.do(Acquire{Session: a, Lock: "x", Owner: owner(1)})
	h.do(Acquire{Session: a, Lock: "y", Owner: owner(2)})
	wantStatus(t, "queue", h.do(Acquire{Session: b, Lock: "x", Owner: owner(3), Wait: true}), StatusQueued)
	h.rec.take()

	r := h.do(Revoke{Lock: "x", Token: g.Token, By: "ops", Why: "stuck"})
	wantStatus(t, "revoke", r, StatusOK)
	if r.Token != g.Token {
		t.Fatalf("revoke result token %d, want %d", r.Token, g.Token)
	}
	next := wantHolder(t, h.f, "x", owner(3))
	if next.Token <= g.Token {
		t.Fatalf("next grant token %d not above the revoked %d", next.Token, g.Token)
	}
	ev := h.rec.take()
	if len(ev) != 2 || ev[0].Kind != EventReleased || ev[0].Reason != ReasonRevoked || ev[0].Owner != owner(1) || ev[0].Token != g.Token ||
		ev[1].Kind != EventGranted || !ev[1].FromQueue {
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
	wantStatus(t, "late release", h.do(Release{Session: a, Lock: "x", Owner: owner(1)}), StatusNotHolder)
	checkInvariants(t, h.f)
}

func TestRevokeIsCompareAndRevoke(t *testing.T) {
	h := atV3(t)
	a := h.open(10*time.Second, 0, "a")
	g := h.do(Acquire{Session: a, Lock: "x", Owner: owner(1)})
	before := h.content()
	wantStatus(t, "wrong token", h.do(Revoke{Lock: "x", Token: g.Token + 1}), StatusNotHolder)
	wantStatus(t, "unknown lock", h.do(Revoke{Lock: "nope", Token: g.Token}), StatusNotHolder)
	if h.content() != before {
		t.Fatal("a refused revoke changed the state")
	}
	wantStatus(t, "revoke", h.do(Revoke{Lock: "x", Token: g.Token}), StatusOK)
	wantFree(t, h.f, "x")
	// A retried revoke cannot end a later grant of the same lock.
	g2 := h.do(Acquire{Session: a, Lock: "x", Owner: owner(2)})
	wantStatus(t, "retried revoke", h.do(Revoke{Lock: "x", Token: g.Token}), StatusNotHolder)
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
	wantStatus(t, "revoke", h.do(Revoke{Lock: "x", Token: g.Token}), StatusOK)
	wantFree(t, h.f, "x")
	ev := h.rec.take()
	if len(ev) != 1 || ev[0].DelayFor != 2*time.Second || ev[0].DelayToken != g.Token {
		t.Fatalf("events %+v: want one release into a 2 s delay", ev)
	}
	wantStatus(t, "end delay", h.do(EndDelay{Delays: []DelayRef{{Lock: "x", Token: g.Token}}}), StatusOK)
	wantHolder(t, h.f, "x", owner(2))
	checkInvariants(t, h.f)
}

func TestRevokeNeedsClusterVersion3(t *testing.T) {
	h := newHarness(t)
	h.do(SetClusterVersion{Version: 2})
	a := h.open(10*time.Second, 0, "a")
	g := h.do(Acquire{Session: a, Lock: "x", Owner: owner(1)})
	before := h.content()
	wantStatus(t, "revoke at version 2", h.do(Revoke{Lock: "x", Token: g.Token}), StatusInvalid)
	if h.content() != before {
		t.Fatal("a refused revoke changed the state")
	}
	if NeedsVersion(Revoke{Lock: "x", Token: 1}) != 3 {
		t.Fatalf("NeedsVersion(Revoke) = %d", NeedsVersion(Revoke{Lock: "x", Token: 1}))
	}
	// An entry of version 2 cannot carry it: a replica of the previous
	// release never decodes a Revoke as something else.
	if _, err := AppendEntryVersion(nil, Entry{Commands: []Command{Revoke{Lock: "x", Token: 1}}}, entryV2); !errors.Is(err, ErrInvalidEntry) {
		t.Fatalf("version-2 encoding of a revoke: %v", err)
	}
	b, _ := EncodeEntry(Entry{Commands: []Command{Revoke{Lock: "x", Token: 1}}})
	b[0] = entryV2
	if _, err := DecodeEntry(b); !errors.Is(err, ErrUnsupportedVersion) {
		t.Fatalf("op 40 in a version-2 entry: %v", err)
	}
}

func TestRevokeValidate(t *testing.T) {
	long := string(make([]byte, MaxDescriptionLen+1))
	for name, c := range map[string]Revoke{
		"no token":  {Lock: "x"},
		"no lock":   {Token: 1},
		"long by":   {Lock: "x", Token: 1, By: long},
		"bad why":   {Lock: "x", Token: 1, Why: "\xff"},
		"nul in lk": {Lock: "a\x00", Token: 1},
	} {
		if err := c.Validate(); !errors.Is(err, ErrInvalidCommand) {
			t.Errorf("%s: %v", name, err)
		}
	}
}
