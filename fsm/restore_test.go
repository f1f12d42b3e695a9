package fsm

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/lockinfo"
)

// restoreInto prepares backup against h's state and installs it in a fresh
// state machine, as every replica would.
func restoreInto(t *testing.T, h *harness, backup []byte) (*FSM, RestoreSummary, []byte) {
	t.Helper()
	var out bytes.Buffer
	sum, err := h.f.PrepareRestore(bytes.NewReader(backup), &out)
	if err != nil {
		t.Fatal(err)
	}
	f := New(nil)
	if err := f.Restore(readCloser(out.Bytes())); err != nil {
		t.Fatalf("installing the prepared snapshot: %v", err)
	}
	checkInvariants(t, f)
	return f, sum, out.Bytes()
}

func TestPrepareRestoreKeepsTokensAboveBothHistories(t *testing.T) {
	// The backup: two sessions, a held lock with a waiter, a lock in delay.
	old := newHarness(t)
	old.do(SetClusterVersion{Version: 2})
	a := old.open(10*time.Second, 0, "billing-7")
	b := old.open(10*time.Second, time.Second, "billing-8")
	g := old.do(Acquire{Session: a, Lock: "invoice:1", Owner: owner(1)})
	old.do(Acquire{Session: b, Lock: "invoice:1", Owner: owner(2), Wait: true})
	old.do(Acquire{Session: b, Lock: "invoice:2", Owner: owner(3)})
	backup := old.snapshot()

	// The running cluster has handed out more sessions and tokens since.
	cur := newHarness(t)
	cur.do(SetClusterVersion{Version: 3})
	cur.do(InitCluster{ID: "running"})
	s := cur.open(10*time.Second, 0, "live")
	for i := range 20 {
		cur.do(Acquire{Session: s, Lock: "t", Owner: owner(byte(10 + i))})
		cur.do(Release{Lock: "t", Owner: owner(byte(10 + i))})
	}
	curStats := cur.f.Stats()

	f, sum, _ := restoreInto(t, cur, backup)
	st := f.Stats()
	if st.LastToken != curStats.LastToken || sum.LastToken != curStats.LastToken || sum.BackupLastToken != g.Token+1 {
		t.Fatalf("token counter %d (summary %+v), want the running cluster's %d", st.LastToken, sum, curStats.LastToken)
	}
	if f.ClusterID() != "running" || f.ClusterVersion() != 3 || st.Index != curStats.Index {
		t.Fatalf("cluster id %q version %d index %d: want the running cluster's", f.ClusterID(), f.ClusterVersion(), st.Index)
	}
	// Sessions come back under ids above every id the running cluster used.
	if _, ok := f.Session(s); ok {
		t.Fatal("a session of the running cluster survived the restore")
	}
	na, nb := a+sum.SessionOffset, b+sum.SessionOffset
	if sum.SessionOffset < s {
		t.Fatalf("offset %d below the running cluster's session %d", sum.SessionOffset, s)
	}
	if si, ok := f.Session(na); !ok || si.Description != "billing-7" {
		t.Fatalf("session %d after restore: %+v %v", na, si, ok)
	}
	if hd := wantHolder(t, f, "invoice:1", owner(1)); hd.Session != na || hd.Token != g.Token {
		t.Fatalf("holder %+v, want session %d token %d", hd, na, g.Token)
	}
	if li, _ := f.Lock("invoice:1"); len(li.Waiters) != 1 || li.Waiters[0].Session != nb {
		t.Fatalf("waiters %+v, want session %d", li.Waiters, nb)
	}
	// The next grant fences out every token of both histories; new session
	// ids never meet restored ones.
	h := &harness{t: t, f: f, rec: &recorder{}, index: st.Index, now: epoch}
	n := h.open(time.Second, 0, "new")
	if n <= nb {
		t.Fatalf("new session id %d not above the restored %d", n, nb)
	}
	if r := h.do(Acquire{Session: n, Lock: "fresh", Owner: owner(99)}); r.Token <= curStats.LastToken {
		t.Fatalf("grant after restore: token %d, not above %d", r.Token, curStats.LastToken)
	}
	// Expiring the restored holder hands the lock to its restored waiter.
	h.do(ExpireSessions{Sessions: []lockinfo.SessionID{na}})
	wantHolder(t, f, "invoice:1", owner(2))
	checkInvariants(t, f)
}

func TestPrepareRestoreKeepsAHigherBackupCounter(t *testing.T) {
	old := newHarness(t)
	a := old.open(10*time.Second, 0, "a") // cluster version 1: a v1 snapshot
	for i := range 30 {
		old.do(Acquire{Session: a, Lock: "t", Owner: owner(byte(i + 1))})
		old.do(Release{Lock: "t", Owner: owner(byte(i + 1))})
	}
	cur := newHarness(t)
	cur.do(SetClusterVersion{Version: 2})
	f, sum, prepared := restoreInto(t, cur, old.snapshot())
	if f.Stats().LastToken != 30 || sum.SessionOffset != 0 || f.ClusterVersion() != 2 {
		t.Fatalf("counter %d offset %d version %d", f.Stats().LastToken, sum.SessionOffset, f.ClusterVersion())
	}
	// Deterministic: the same inputs give the same bytes.
	_, _, again := restoreInto(t, cur, old.snapshot())
	if !bytes.Equal(prepared, again) {
		t.Fatal("PrepareRestore is not deterministic")
	}
}

func TestPrepareRestoreRefusesBadInput(t *testing.T) {
	cur := newHarness(t)
	before := cur.digest()
	var out bytes.Buffer
	good := cur.snapshot()
	for name, b := range map[string][]byte{
		"empty":     nil,
		"garbage":   []byte("not a snapshot"),
		"truncated": good[:len(good)-2],
	} {
		if _, err := cur.f.PrepareRestore(bytes.NewReader(b), &out); !errors.Is(err, fsmwire.ErrInvalidSnapshot) {
			t.Errorf("%s: %v", name, err)
		}
	}
	future := append([]byte(nil), good...)
	future[4] = 9
	if _, err := cur.f.PrepareRestore(bytes.NewReader(future), &out); !errors.Is(err, fsmwire.ErrUnsupportedVersion) {
		t.Errorf("future version: %v", err)
	}
	if cur.digest() != before || cur.f.Halted() != nil {
		t.Fatal("PrepareRestore changed the running state")
	}
}

// FuzzPrepareRestore: a backup is input from outside (an operator's file):
// preparing it never panics, and whatever it accepts installs.
func FuzzPrepareRestore(f *testing.F) {
	f.Add(fuzzFixture(f).snapshot())
	f.Add(fuzzFixtureV2(f).snapshot())
	f.Add(fairFixture(f).snapshot())
	f.Add([]byte("RLKS\x02"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cur := fuzzFixtureV2(t)
		var out bytes.Buffer
		if _, err := cur.f.PrepareRestore(bytes.NewReader(data), &out); err != nil {
			if !errors.Is(err, fsmwire.ErrInvalidSnapshot) {
				t.Fatalf("error does not wrap ErrInvalidSnapshot: %v", err)
			}
			return
		}
		g := New(nil)
		if err := g.Restore(readCloser(out.Bytes())); err != nil {
			t.Fatalf("a prepared restore does not install: %v", err)
		}
		checkInvariants(t, g)
	})
}

// The shared grants of a backup (semaphore permits, readers) move with
// their sessions: before, the restore of a backup holding a semaphore's
// permit failed with "lock "pool": unknown session N".
func TestPrepareRestoreMovesSharedGrants(t *testing.T) {
	old := atV3(t)
	a := old.open(10*time.Second, 0, "worker")
	wantStatus(t, "permit", old.do(Acquire{Session: a, Lock: "pool", Owner: owner(1), Limit: 2, Permits: 1}), fsmwire.StatusGranted)
	wantStatus(t, "read", old.do(Acquire{Session: a, Lock: "doc", Owner: owner(2), Shared: true}), fsmwire.StatusGranted)
	backup := old.snapshot()

	cur := atV3(t)
	for range 3 {
		cur.open(10*time.Second, 0, "live")
	}
	f, sum, _ := restoreInto(t, cur, backup)
	moved := a + sum.SessionOffset
	for _, name := range []string{"pool", "doc"} {
		li, ok := f.Lock(name)
		if !ok || len(li.Shared) != 1 || li.Shared[0].Session != moved {
			t.Errorf("%s after the restore: %+v, want one shared grant of session %d", name, li, moved)
		}
	}
}
