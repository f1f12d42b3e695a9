package fsm

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/raftlock/raftlock/internal/fsmwire"
)

func TestQuotasRefuseAndChangeNothing(t *testing.T) {
	h := newHarness(t)
	lim := Limits{MaxLockNameLen: 8, MaxWaitersPerLock: 2, MaxLocksPerSession: 3, MaxSessions: 4, RequestWindow: 16}
	wantStatus(t, "set limits", h.do(SetLimits{Limits: lim}), fsmwire.StatusOK)
	if h.f.Limits() != lim {
		t.Fatalf("limits %+v", h.f.Limits())
	}
	a := h.open(time.Minute, 0, "a")
	b := h.open(time.Minute, 0, "b")
	c := h.open(time.Minute, 0, "c")
	h.do(Acquire{Session: a, Lock: "l", Owner: owner(1)})
	h.do(Acquire{Session: b, Lock: "l", Owner: owner(2), Wait: true})
	h.do(Acquire{Session: b, Lock: "l", Owner: owner(3), Wait: true})
	h.do(Acquire{Session: a, Lock: "m", Owner: owner(4)})
	h.do(Acquire{Session: a, Lock: "n", Owner: owner(5)})
	h.open(time.Minute, 0, "d")

	for _, tc := range []struct {
		name string
		c    Command
		q    fsmwire.Quota
	}{
		{"lock name", Acquire{Session: c, Lock: "123456789", Owner: owner(6)}, fsmwire.QuotaLockName},
		{"waiters", Acquire{Session: c, Lock: "l", Owner: owner(6), Wait: true}, fsmwire.QuotaWaiters},
		{"locks per session", Acquire{Session: a, Lock: "o", Owner: owner(6)}, fsmwire.QuotaSessionLocks},
		{"locks per session, waiting", Acquire{Session: a, Lock: "x", Owner: owner(6), Wait: true}, fsmwire.QuotaSessionLocks},
		{"sessions", OpenSession{TTL: time.Minute}, fsmwire.QuotaSessions},
		{"requests", Acquire{Session: c, Lock: "p", Owner: owner(6), Seq: 17, AckBelow: 1}, fsmwire.QuotaRequests},
	} {
		before := h.content()
		h.rec.take()
		r := h.do(tc.c)
		if r.Status != fsmwire.StatusQuota || r.Quota != tc.q || r.Reason == "" || !errors.Is(r.Err(), fsmwire.ErrQuota) || !strings.Contains(r.Err().Error(), tc.q.String()) {
			t.Fatalf("%s: %+v (%v)", tc.name, r, r.Err())
		}
		if h.content() != before || len(h.rec.take()) != 0 {
			t.Fatalf("%s: the refused command changed the state", tc.name)
		}
	}
	// Retries of existing acquisitions are not new ones: never refused.
	wantStatus(t, "retry of a waiter", h.do(Acquire{Session: b, Lock: "l", Owner: owner(3), Wait: true}), fsmwire.StatusQueued)
	wantStatus(t, "retry of a holder", h.do(Acquire{Session: a, Lock: "n", Owner: owner(5)}), fsmwire.StatusGranted)
	// Room again once something ends; zero limits mean none.
	h.do(Release{Lock: "n", Owner: owner(5)})
	wantStatus(t, "room again", h.do(Acquire{Session: a, Lock: "o", Owner: owner(6)}), fsmwire.StatusGranted)
	h.do(SetLimits{})
	for i := range 5 {
		wantStatus(t, "no quota", h.do(OpenSession{TTL: time.Minute}), fsmwire.StatusOK)
		_ = i
	}
	// Limits out of their hard bounds are refused.
	for _, l := range []Limits{{MaxLockNameLen: fsmwire.MaxLockNameLen + 1}, {RequestWindow: fsmwire.MaxRequestWindow + 1}} {
		wantStatus(t, "bad limits", h.do(SetLimits{Limits: l}), fsmwire.StatusInvalid)
	}
	if _, err := EncodeEntry(Entry{Commands: []Command{SetLimits{Limits: Limits{MaxSessions: -1}}}}); !errors.Is(err, fsmwire.ErrInvalidEntry) {
		t.Fatalf("a negative limit encoded: %v", err)
	}
}

func TestClusterVersionAndID(t *testing.T) {
	h := newHarness(t)
	if h.f.ClusterVersion() != 1 || h.f.ClusterID() != "" {
		t.Fatalf("new state: version %d id %q", h.f.ClusterVersion(), h.f.ClusterID())
	}
	wantStatus(t, "init", h.do(InitCluster{ID: "c-1"}), fsmwire.StatusOK)
	if ev := h.rec.take(); len(ev) != 1 || ev[0].Kind != fsmwire.EventClusterChanged {
		t.Fatalf("events %v", kinds(ev))
	}
	wantStatus(t, "same id", h.do(InitCluster{ID: "c-1"}), fsmwire.StatusOK)
	wantStatus(t, "another id", h.do(InitCluster{ID: "c-2"}), fsmwire.StatusInvalid)
	wantStatus(t, "bad id", h.do(InitCluster{ID: "a b"}), fsmwire.StatusInvalid)
	if ev := h.rec.take(); len(ev) != 0 || h.f.ClusterID() != "c-1" {
		t.Fatalf("id %q, events %v", h.f.ClusterID(), kinds(ev))
	}
	wantStatus(t, "raise", h.do(SetClusterVersion{Version: 2}), fsmwire.StatusOK)
	if ev := h.rec.take(); len(ev) != 1 || ev[0].Kind != fsmwire.EventClusterChanged || h.f.ClusterVersion() != 2 {
		t.Fatalf("version %d, events %v", h.f.ClusterVersion(), kinds(ev))
	}
	wantStatus(t, "again", h.do(SetClusterVersion{Version: 2}), fsmwire.StatusOK)
	wantStatus(t, "lower", h.do(SetClusterVersion{Version: 1}), fsmwire.StatusInvalid)
	if ev := h.rec.take(); len(ev) != 0 || h.f.ClusterVersion() != 2 {
		t.Fatalf("version %d, events %v", h.f.ClusterVersion(), kinds(ev))
	}
	// Both travel in snapshots (version 2).
	snap := h.snapshot()
	if snap[4] != snapshotV2 {
		t.Fatalf("snapshot version %d at cluster version 2", snap[4])
	}
	f := New(nil)
	if err := f.Restore(readCloser(snap)); err != nil || f.ClusterID() != "c-1" || f.ClusterVersion() != 2 {
		t.Fatalf("restore: %v, id %q version %d", err, f.ClusterID(), f.ClusterVersion())
	}
}

func TestEntryVersionFollowsTheCommands(t *testing.T) {
	for _, tc := range []struct {
		c    Command
		want byte
	}{
		{Acquire{Session: 1, Lock: "l", Owner: owner(1)}, 1},
		{Acquire{Session: 1, Lock: "l", Owner: owner(1), Seq: 1}, 2},
		{Release{Lock: "l", Owner: owner(1)}, 1},
		{Release{Session: 1, Lock: "l", Owner: owner(1)}, 2},
		{CloseSession{Session: 1, Seq: 3, AckBelow: 2}, 2},
		{EndDelay{}, 2}, {SetLimits{}, 2}, {SetClusterVersion{Version: 2}, 2}, {InitCluster{ID: "x"}, 2},
		{Tick{}, 1}, {Noop{}, 1},
		{CloseSession{Session: 1, Lapsed: true}, 4}, {Release{Session: 1, Lock: "l", Owner: owner(1), Lapsed: true}, 4},
	} {
		b, err := EncodeEntry(Entry{Commands: []Command{tc.c}})
		if err != nil || b[0] != tc.want {
			t.Fatalf("%T%+v: version %d (%v), want %d", tc.c, tc.c, b[0], err, tc.want)
		}
		if _, err := appendEntryVersion(nil, Entry{Commands: []Command{tc.c}}, 1); (err == nil) != (tc.want == 1) {
			t.Fatalf("%T%+v in version 1: %v", tc.c, tc.c, err)
		}
		if d := Downgrade(tc.c, 1); d.version() != 1 && NeedsVersion(tc.c) == 1 && tc.c.op() != fsmwire.OpSetClusterVersion {
			t.Fatalf("Downgrade(%+v) = %+v still needs version 2", tc.c, d)
		}
	}
}
