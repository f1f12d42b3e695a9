package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/lockinfo"
)

// The rule of fairshare.go, case by case.
func TestFairShareRule(t *testing.T) {
	l := Limits{NodeShares: 4} // a node's share of 160 is 10; 40 held back
	for _, c := range []struct {
		bound, total, used, n int64
		want                  int
	}{
		{0, 1 << 40, 1 << 40, 1, admitted},        // no bound
		{160, 159, 9, 1, admitted},                // the last one
		{160, 160, 0, 1, overBound},               // full: even a node within its share
		{160, 155, 0, 10, overBound},              // n counts
		{160, 119, 119, 1, admitted},              // a node alone up to three quarters
		{160, 120, 120, 1, overShare},             // past them, beyond its share
		{160, 120, 9, 1, admitted},                // past them, within its share
		{160, 150, 9, 1, admitted},                // within its share
		{160, 150, 10, 1, overShare},              // its share used
		{160, 120, 9, 2, overShare},               // n would pass the share
		{160, 110, 9, 20, overShare},              // n would pass three quarters and the share
		{161, 120, 120, 1, admitted},              // 161 − 4×10 = 121
		{161, 121, 121, 1, overShare},             //
		{3, 1, 1, 1, overShare},                   // tiny bounds: the share is at least 1
		{3, 2, 0, 1, admitted},                    //
		{1 << 40, 3 << 38, 1 << 36, 1, overShare}, // large ones
		{1 << 40, 3 << 38, 1<<36 - 1, 1, admitted},
		{1 << 40, 3<<38 - 1, 1 << 39, 1, admitted},
	} {
		if got := l.fairShare(c.bound, c.total, c.used, c.n); got != c.want {
			t.Errorf("fairShare(bound %d, total %d, used %d, n %d) = %d, want %d", c.bound, c.total, c.used, c.n, got, c.want)
		}
	}
	if got := (Limits{}).fairShare(160, 159, 159, 1); got != admitted {
		t.Errorf("without shares a node may take it all: %d", got)
	}
}

// The guarantee of fairshare.go: whatever order up to NodeShares nodes
// ask in, a node within its share is never refused.
func TestFairShareGuarantee(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		shares := rapid.IntRange(1, 5).Draw(rt, "shares")
		l := Limits{NodeShares: shares}
		bound := int64(rapid.IntRange(2*shares, 200).Draw(rt, "bound"))
		used := make([]int64, shares)
		var total int64
		for range rapid.IntRange(1, 400).Draw(rt, "steps") {
			i := rapid.IntRange(0, shares-1).Draw(rt, "node")
			if rapid.IntRange(0, 4).Draw(rt, "release") == 0 {
				if used[i] > 0 {
					used[i]--
					total--
				}
				continue
			}
			v := l.fairShare(bound, total, used[i], 1)
			if used[i] < l.nodeShare(bound) && v != admitted {
				rt.Fatalf("node %d within its share (%d of %d) refused: %d (total %d of %d)", i, used[i], l.nodeShare(bound), v, total, bound)
			}
			if v == admitted {
				used[i]++
				total++
			}
			if total > bound {
				rt.Fatalf("total %d beyond the bound %d", total, bound)
			}
		}
	})
}

// fairHarness is a state machine at cluster version 4 with lim.
func fairHarness(t *testing.T, lim Limits) *harness {
	t.Helper()
	h := newHarness(t)
	h.do(SetClusterVersion{Version: 4})
	wantStatus(t, "limits", h.do(SetLimits{Limits: lim}), fsmwire.StatusOK)
	if h.f.Limits() != lim {
		t.Fatalf("limits %+v", h.f.Limits())
	}
	return h
}

// wantQuota checks that c is refused by q (a share or not) and changes
// nothing.
func wantQuota(t *testing.T, h *harness, what string, c Command, q fsmwire.Quota) Result {
	t.Helper()
	before := h.content()
	h.rec.take()
	r := h.do(c)
	err := r.Err()
	if r.Status != fsmwire.StatusQuota || r.Quota != q || !errors.Is(err, fsmwire.ErrQuota) || errors.Is(err, fsmwire.ErrFairShare) != q.Share() ||
		!strings.Contains(err.Error(), q.String()) {
		t.Fatalf("%s: %+v (%v), want quota %s", what, r, err, q)
	}
	if h.content() != before || len(h.rec.take()) != 0 {
		t.Fatalf("%s: the refused command changed the state", what)
	}
	return r
}

func openOn(t *testing.T, h *harness, node string) lockinfo.SessionID {
	t.Helper()
	r := h.do(OpenSession{TTL: time.Minute, Description: "client", Node: node})
	if r.Status != fsmwire.StatusOK {
		t.Fatalf("open a session of %q: %+v (%v)", node, r, r.Err())
	}
	return r.Session
}

// One node's clients open sessions until refused: a node alone gets half
// the sessions, and then every other node still gets its share; the
// reserve gives the refused node a few more.
func TestNodeShareOfSessions(t *testing.T) {
	h := fairHarness(t, Limits{MaxSessions: 64, NodeShares: 2}) // a share of 8; 16 held back
	for range 48 {
		openOn(t, h, "a")
	}
	r := wantQuota(t, h, "a's 49th", OpenSession{TTL: time.Minute, Node: "a"}, fsmwire.QuotaNodeSessions)
	t.Log(r.Err())
	for range 8 {
		openOn(t, h, "b")
	}
	wantQuota(t, h, "b's 9th", OpenSession{TTL: time.Minute, Node: "b"}, fsmwire.QuotaNodeSessions)
	for range 8 { // beyond NodeShares nodes, while the cluster has room
		openOn(t, h, "c")
	}
	wantQuota(t, h, "the 65th", OpenSession{TTL: time.Minute, Node: "d"}, fsmwire.QuotaSessions)

	// The reserve: 4 more for each node, even at the cluster's bound.
	for i := range reservedSessions {
		r := h.do(OpenSession{TTL: time.Minute, Node: "a", Reserved: true})
		if si, ok := h.f.Session(r.Session); r.Status != fsmwire.StatusOK || !ok || !si.Reserved || si.Node != "a" {
			t.Fatalf("reserved session %d: %+v %+v", i, r, si)
		}
	}
	wantQuota(t, h, "a's 5th reserved", OpenSession{TTL: time.Minute, Node: "a", Reserved: true}, fsmwire.QuotaSessions)
	r = h.do(OpenSession{TTL: time.Minute, Node: "d", Reserved: true})
	wantStatus(t, "d's reserved", r, fsmwire.StatusOK)
	if st := h.f.Stats(); st.Sessions != 69 {
		t.Fatalf("%d sessions", st.Sessions)
	}

	// A reserved session that ends frees its slot of the reserve, not of
	// the share.
	h.do(CloseSession{Session: r.Session})
	wantQuota(t, h, "d, not reserved", OpenSession{TTL: time.Minute, Node: "d"}, fsmwire.QuotaSessions)
	wantStatus(t, "d's reserved again", h.do(OpenSession{TTL: time.Minute, Node: "d", Reserved: true}), fsmwire.StatusOK)

	// A reserved request within the share takes a session of the share.
	h2 := fairHarness(t, Limits{MaxSessions: 64, NodeShares: 2})
	if si, _ := h2.f.Session(h2.do(OpenSession{TTL: time.Minute, Node: "a", Reserved: true}).Session); si.Reserved {
		t.Fatalf("a reserved request within the share went to the reserve")
	}
}

// A session's share of a lock's queue, and a node's.
func TestShareOfALocksQueue(t *testing.T) {
	h := fairHarness(t, Limits{MaxWaitersPerLock: 16, NodeShares: 2, MaxSessionWaitersPerLock: 3}) // a node's share of a queue: 2, 4 held back
	holder := openOn(t, h, "c")
	wantStatus(t, "hold", h.do(Acquire{Session: holder, Lock: "l", Owner: owner(1)}), fsmwire.StatusGranted)
	o := byte(10)
	wait := func(s lockinfo.SessionID) Acquire {
		o++
		return Acquire{Session: s, Lock: "l", Owner: owner(o), Wait: true}
	}
	a := []lockinfo.SessionID{openOn(t, h, "a"), openOn(t, h, "a"), openOn(t, h, "a"), openOn(t, h, "a")}
	for range 3 {
		wantStatus(t, "a[0] waits", h.do(wait(a[0])), fsmwire.StatusQueued)
	}
	wantQuota(t, h, "a[0]'s 4th", wait(a[0]), fsmwire.QuotaSessionWaiters)
	for _, s := range a[1:] {
		for range 3 {
			wantStatus(t, "a's sessions wait", h.do(wait(s)), fsmwire.StatusQueued)
		}
	}
	// Node a has 12 of 16 waiters: three quarters of the queue.
	a3 := openOn(t, h, "a")
	wantQuota(t, h, "a's 13th", wait(a3), fsmwire.QuotaNodeWaiters)
	b1, b2 := openOn(t, h, "b"), openOn(t, h, "b")
	wantStatus(t, "b1 waits", h.do(wait(b1)), fsmwire.StatusQueued)
	wantStatus(t, "b2 waits", h.do(wait(b2)), fsmwire.StatusQueued)
	wantQuota(t, h, "b's 3rd", wait(b2), fsmwire.QuotaNodeWaiters)
	// Room again once the queue is under three quarters.
	h.do(CloseSession{Session: a[0]})
	wantStatus(t, "b2 waits again", h.do(wait(b2)), fsmwire.StatusQueued)
	wantQuota(t, h, "b's 4th", wait(b1), fsmwire.QuotaNodeWaiters)
	// Another lock is another queue.
	h.do(Acquire{Session: holder, Lock: "m", Owner: owner(200)})
	wantStatus(t, "a's on m", h.do(Acquire{Session: a3, Lock: "m", Owner: owner(201), Wait: true}), fsmwire.StatusQueued)
}

// The same in a queue long enough for its index (counts kept, not
// counted).
func TestShareOfALongQueue(t *testing.T) {
	h := fairHarness(t, Limits{MaxWaitersPerLock: 200, NodeShares: 4, MaxSessionWaitersPerLock: 20}) // node share 12, 48 held back
	holder := openOn(t, h, "c")
	h.do(Acquire{Session: holder, Lock: "l", Owner: owner(1)})
	n := 0
	wait := func(s lockinfo.SessionID) Acquire {
		n++
		return Acquire{Session: s, Lock: "l", Owner: benchOwner(n), Wait: true}
	}
	var as []lockinfo.SessionID
	for queued := 0; queued < 152; {
		s := openOn(t, h, "a")
		as = append(as, s)
		for range min(20, 152-queued) {
			wantStatus(t, "a waits", h.do(wait(s)), fsmwire.StatusQueued)
			queued++
		}
		if queued%20 == 0 {
			wantQuota(t, h, "a session's 21st", wait(s), fsmwire.QuotaSessionWaiters)
		}
	}
	wantQuota(t, h, "a at three quarters of the queue", wait(openOn(t, h, "a")), fsmwire.QuotaNodeWaiters)
	b, b2 := openOn(t, h, "b"), openOn(t, h, "b")
	for range 10 {
		wantStatus(t, "b waits", h.do(wait(b)), fsmwire.StatusQueued)
	}
	for range 2 {
		wantStatus(t, "b2 waits", h.do(wait(b2)), fsmwire.StatusQueued)
	}
	wantQuota(t, h, "b's share", wait(b2), fsmwire.QuotaNodeWaiters)
	h.do(ExpireSessions{Sessions: as[:3]})
	wantStatus(t, "b waits again", h.do(wait(b2)), fsmwire.StatusQueued)
	checkInvariants(t, h.f)
}

// The cluster's bounds on locks and bytes, and the nodes' shares of them;
// lock-delays count for the node whose session started them.
func TestClusterBoundsOfLocksAndBytes(t *testing.T) {
	h := fairHarness(t, Limits{MaxLocks: 40, NodeShares: 2}) // a share of 5, 10 held back
	a, b := openOn(t, h, "a"), openOn(t, h, "b")
	for i := range 30 {
		wantStatus(t, "a locks", h.do(Acquire{Session: a, Lock: fmt.Sprint("a", i), Owner: owner(1)}), fsmwire.StatusGranted)
	}
	wantQuota(t, h, "a's 31st", Acquire{Session: a, Lock: "a30", Owner: owner(1)}, fsmwire.QuotaNodeLocks)
	wantQuota(t, h, "a's 31st, waiting", Acquire{Session: a, Lock: "b0", Owner: owner(1), Wait: true}, fsmwire.QuotaNodeLocks)
	for i := range 5 {
		wantStatus(t, "b locks", h.do(Acquire{Session: b, Lock: fmt.Sprint("b", i), Owner: owner(2)}), fsmwire.StatusGranted)
	}
	wantQuota(t, h, "b's 6th", Acquire{Session: b, Lock: "b5", Owner: owner(2)}, fsmwire.QuotaNodeLocks)

	// The bound itself, without shares: grants, waiters and lock-delays.
	h = fairHarness(t, Limits{MaxLocks: 4})
	d := h.do(OpenSession{TTL: time.Minute, LockDelay: time.Second, Node: "a"}).Session
	c := openOn(t, h, "b")
	h.entry(Acquire{Session: d, Lock: "x", Owner: owner(1)}, Acquire{Session: d, Lock: "y", Owner: owner(2)},
		Acquire{Session: c, Lock: "x", Owner: owner(3), Wait: true})
	wantStatus(t, "the 4th", h.do(Acquire{Session: c, Lock: "z", Owner: owner(4)}), fsmwire.StatusGranted)
	wantQuota(t, h, "the 5th", Acquire{Session: c, Lock: "w", Owner: owner(5)}, fsmwire.QuotaLocks)
	h.do(ExpireSessions{Sessions: []lockinfo.SessionID{d}}) // x, y delayed: still two of the four
	wantQuota(t, h, "with two lock-delays", Acquire{Session: c, Lock: "w", Owner: owner(5)}, fsmwire.QuotaLocks)
	if u := h.f.st.nodes["a"]; u != (usage{locks: 2, bytes: 2 * delayBytes("x")}) {
		t.Fatalf("node a's lock-delays: %+v", u)
	}
	var refs []DelayRef
	for _, di := range h.f.DelayedLocks() {
		refs = append(refs, di.DelayRef)
	}
	h.do(EndDelay{Delays: refs}) // x to c's waiter; y forgotten
	wantStatus(t, "room again", h.do(Acquire{Session: c, Lock: "w", Owner: owner(5)}), fsmwire.StatusGranted)
	if _, ok := h.f.st.nodes["a"]; ok {
		t.Fatalf("node a still uses %+v", h.f.st.nodes["a"])
	}

	// Bytes: names, values, descriptions, and the nodes' shares of them.
	session := sessionCharge + int64(len("client")+len("a"))
	lim := Limits{MaxStateBytes: 2*session + 4*acquisitionBytes("k0", "")}
	h = fairHarness(t, lim)
	a, b = openOn(t, h, "a"), openOn(t, h, "b")
	for i := range 4 {
		wantStatus(t, "a's locks", h.do(Acquire{Session: a, Lock: fmt.Sprint("k", i), Owner: owner(1)}), fsmwire.StatusGranted)
	}
	wantQuota(t, h, "the bytes' bound", Acquire{Session: b, Lock: "k9", Owner: owner(2)}, fsmwire.QuotaStateBytes)
	h.do(Release{Lock: "k3", Owner: owner(1)})
	wantQuota(t, h, "a longer name", Acquire{Session: b, Lock: "k99", Owner: owner(2)}, fsmwire.QuotaStateBytes)
	wantQuota(t, h, "a value", Acquire{Session: b, Lock: "k9", Owner: owner(2), Value: "v"}, fsmwire.QuotaStateBytes)
	wantStatus(t, "it fits", h.do(Acquire{Session: b, Lock: "k9", Owner: owner(2)}), fsmwire.StatusGranted)
	wantQuota(t, h, "a value set", SetValue{Session: b, Lock: "k9", Owner: owner(2), Value: "v"}, fsmwire.QuotaStateBytes)
	h.do(Release{Lock: "k2", Owner: owner(1)})
	wantStatus(t, "a value set", h.do(SetValue{Session: b, Lock: "k9", Owner: owner(2), Value: "v"}), fsmwire.StatusOK)
	wantStatus(t, "a shorter value", h.do(SetValue{Session: b, Lock: "k9", Owner: owner(2)}), fsmwire.StatusOK)
	if got := h.f.st.total.bytes; got != 2*session+3*acquisitionBytes("k0", "") {
		t.Fatalf("accounted %d bytes", got)
	}

	lim = Limits{MaxStateBytes: 40 * acquisitionBytes("k0", ""), NodeShares: 2}
	h = fairHarness(t, lim)
	a = openOn(t, h, "a")
	i := 0
	for ; h.do(Acquire{Session: a, Lock: fmt.Sprintf("k%d", i%10), Owner: benchOwner(i), Wait: true}).Status != fsmwire.StatusQuota; i++ {
	}
	r := h.do(Acquire{Session: a, Lock: "k0", Owner: benchOwner(1000), Wait: true})
	if r.Quota != fsmwire.QuotaNodeBytes || h.f.st.total.bytes > lim.MaxStateBytes*3/4 {
		t.Fatalf("a alone: %+v with %d of %d bytes", r, h.f.st.total.bytes, lim.MaxStateBytes)
	}
	b = openOn(t, h, "b")
	for j := range 4 { // (share 2,730 − session 359) / 546
		wantStatus(t, "b within its share", h.do(Acquire{Session: b, Lock: fmt.Sprint("b", j), Owner: owner(2)}), fsmwire.StatusGranted)
	}
	wantQuota(t, h, "b beyond its share", Acquire{Session: b, Lock: "b9", Owner: owner(2)}, fsmwire.QuotaNodeBytes)
	checkInvariants(t, h.f)
}

// Below cluster version 4 the forms of the fair shares are refused (the
// node never proposes them: Downgrade drops them); the older forms decode
// and apply as before; each form is written exactly when needed.
func TestFairSharesNeedVersion4(t *testing.T) {
	fair := Limits{MaxSessions: 5, MaxLocks: 7, MaxStateBytes: 1 << 20, NodeShares: 2, MaxSessionWaitersPerLock: 3}
	for _, c := range []Command{
		SetLimits{Limits: fair}, SetLimits{Limits: Limits{NodeShares: 1}},
		OpenSession{TTL: time.Second, Node: "n1"}, OpenSession{TTL: time.Second, Reserved: true},
	} {
		if NeedsVersion(c) != 4 {
			t.Fatalf("%+v needs version %d", c, NeedsVersion(c))
		}
		for v := uint64(1); v < 4; v++ {
			h := newHarness(t)
			if v > 1 {
				h.do(SetClusterVersion{Version: v})
			}
			before := h.content()
			wantStatus(t, fmt.Sprintf("%+v at version %d", c, v), h.do(c), fsmwire.StatusInvalid)
			if h.content() != before {
				t.Fatalf("%+v changed the state at version %d", c, v)
			}
			d := Downgrade(c, v)
			if NeedsVersion(d) > max(v, 2) || fairForm(d) {
				t.Fatalf("Downgrade(%+v, %d) = %+v", c, v, d)
			}
		}
		if !reflect.DeepEqual(Downgrade(c, 4), c) {
			t.Fatalf("Downgrade at version 4 changed %+v", c)
		}
	}
	if got := Downgrade(SetLimits{Limits: fair}, 3).(SetLimits).Limits; got != (Limits{MaxSessions: 5}) {
		t.Fatalf("downgraded limits %+v", got)
	}
	for _, c := range []struct {
		c  Command
		op fsmwire.Op
	}{
		{SetLimits{Limits: DefaultLimits().withoutFair()}, fsmwire.OpSetLimits},
		{SetLimits{Limits: DefaultLimits()}, fsmwire.OpSetLimitsFair},
		{OpenSession{TTL: time.Second, Description: "d"}, fsmwire.OpOpenSession},
		{OpenSession{TTL: time.Second, Node: "n"}, fsmwire.OpOpenSessionFair},
		{OpenSession{TTL: time.Second, Reserved: true}, fsmwire.OpOpenSessionFair},
	} {
		b, err := EncodeEntry(Entry{Commands: []Command{c.c}})
		if err != nil {
			t.Fatal(err)
		}
		if op := fsmwire.Op(b[3]); op != c.op || c.op != c.c.op() && b[0] != fsmwire.EntryV4 {
			t.Fatalf("%+v written as type %d in entry version %d, want %d", c.c, op, b[0], c.op)
		}
	}
	// A form of version 4 that carries nothing of version 4 is not
	// canonical: refused.
	for name, b := range map[string][]byte{
		"limits": append([]byte{4, 0, 1, byte(fsmwire.OpSetLimitsFair)}, make([]byte, 9)...),
		"open":   {4, 0, 1, byte(fsmwire.OpOpenSessionFair), 2, 0, 0, 0, 0},
		"flags":  {4, 0, 1, byte(fsmwire.OpOpenSessionFair), 2, 0, 0, 1, 'n', 2},
		"v3":     {3, 0, 1, byte(fsmwire.OpOpenSessionFair), 2, 0, 0, 1, 'n', 1},
	} {
		if _, err := DecodeEntry(b); !errors.Is(err, fsmwire.ErrInvalidEntry) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if e, err := DecodeEntry([]byte{4, 0, 1, byte(fsmwire.OpOpenSessionFair), 2, 0, 0, 1, 'n', 1}); err != nil ||
		!reflect.DeepEqual(e.Commands, []Command{OpenSession{TTL: 1, Node: "n", Reserved: true}}) {
		t.Fatalf("decode: %v %+v", err, e)
	}
}

// fairFixture is fuzzFixtureV4 with the fair shares' state: limits,
// sessions of nodes, one in a reserve, waiters of nodes, a lock-delay of a
// node.
func fairFixture(t tb) *harness {
	h := fuzzFixtureV4(t)
	h.do(SetLimits{Limits: DefaultLimits()})
	a := h.do(OpenSession{TTL: time.Second, LockDelay: time.Second, Description: "a", Node: "n1"}).Session
	b := h.do(OpenSession{TTL: time.Second, Description: "b", Node: "?n2"}).Session
	r := h.do(OpenSession{TTL: time.Second, Description: "admin", Node: "n2", Reserved: true}).Session
	h.entry(
		Acquire{Session: a, Lock: "fair", Owner: owner(50), Value: "a"},
		Acquire{Session: a, Lock: "gone", Owner: owner(51)},
		Acquire{Session: b, Lock: "fair", Owner: owner(52), Wait: true},
		Acquire{Session: r, Lock: "fair", Owner: owner(53), Wait: true, Value: "admin"},
	)
	for i := range 20 { // a queue with its index
		h.do(Acquire{Session: b, Lock: "gone", Owner: benchOwner(i), Wait: true})
	}
	h.do(ExpireSessions{Sessions: []lockinfo.SessionID{a}})
	return h
}

// The section's state round-trips; a state without it writes no section;
// the usage is recounted on restore to what was kept.
func TestFairShareSnapshot(t *testing.T) {
	h := fairFixture(t)
	snap := h.snapshot()
	f := New(nil)
	if err := f.Restore(readCloser(snap)); err != nil {
		t.Fatal(err)
	}
	var again bytes.Buffer
	if err := f.WriteSnapshot(&again); err != nil || !bytes.Equal(again.Bytes(), snap) {
		t.Fatalf("snapshot → restore → snapshot differs (%v)", err)
	}
	if f.Limits() != DefaultLimits() || !reflect.DeepEqual(f.st.nodes, h.f.st.nodes) || f.st.total != h.f.st.total {
		t.Fatalf("restored limits %+v, usage %+v %+v; was %+v %+v", f.Limits(), f.st.nodes, f.st.total, h.f.st.nodes, h.f.st.total)
	}
	if len(f.st.nodes) != 4 || f.st.nodes["n1"] != (usage{locks: 2, bytes: 2*delayCharge + int64(len("fair")+len("gone"))}) || f.st.nodes["n2"].sessions != 1 {
		t.Fatalf("usage %+v", f.st.nodes)
	}
	for _, si := range allSessions(h.f) {
		if got, _ := f.Session(si.ID); got != si {
			t.Fatalf("session %+v restored as %+v", si, got)
		}
	}
	checkInvariants(t, f)

	// Without anything of the fair shares: no section, the bytes of
	// before.
	if n, _ := prepareFairSection(fuzzFixtureV4(t).f.st); n != 0 {
		t.Fatalf("%d records of the fair shares without any", n)
	}

	// A restore keeps the nodes of the backup's sessions (new ids).
	cur := fuzzFixtureV4(t)
	var out bytes.Buffer
	if _, err := cur.f.PrepareRestore(bytes.NewReader(snap), &out); err != nil {
		t.Fatal(err)
	}
	g := New(nil)
	if err := g.Restore(readCloser(out.Bytes())); err != nil {
		t.Fatal(err)
	}
	nodes := map[string]int{}
	for _, si := range allSessions(g) {
		nodes[si.Node]++
	}
	if nodes["n2"] != 1 || nodes["?n2"] != 1 || !reflect.DeepEqual(g.st.nodes["?n2"], h.f.st.nodes["?n2"]) {
		t.Fatalf("restored nodes %v, usage %+v", nodes, g.st.nodes)
	}
	checkInvariants(t, g)
}

// A reader refuses records of the section that are out of order, name
// what does not exist, or are malformed.
func TestFairShareSnapshotRefusesBadRecords(t *testing.T) {
	h := fairFixture(t)
	good := h.f.st.freeze()
	n, enc := prepareFairSection(good)
	recs := make([][]byte, n)
	for i := range recs {
		recs[i] = enc(i, nil)
	}
	t.Logf("%d records", n)
	for name, mangle := range map[string]func([][]byte) [][]byte{
		"limits twice":   func(r [][]byte) [][]byte { return append([][]byte{r[0]}, r...) },
		"out of order":   func(r [][]byte) [][]byte { r[1], r[2] = r[2], r[1]; return r },
		"kind order":     func(r [][]byte) [][]byte { r[0], r[1] = r[1], r[0]; return r },
		"unknown kind":   func(r [][]byte) [][]byte { r[1] = append([]byte{9}, r[1][1:]...); return r },
		"no session":     func(r [][]byte) [][]byte { r[1] = []byte{fairRecordSession, 99, 1, 'x', 0}; return r },
		"bad flags":      func(r [][]byte) [][]byte { r[1] = append(r[1][:len(r[1])-1], 2); return r },
		"no node":        func(r [][]byte) [][]byte { r[1] = []byte{fairRecordSession, r[1][1], 0, 0}; return r },
		"no delay":       func(r [][]byte) [][]byte { r[len(r)-1] = []byte{fairRecordDelay, 1, 'q', 1, 'x'}; return r },
		"trailing":       func(r [][]byte) [][]byte { r[2] = append(r[2], 0); return r },
		"bad limits":     func(r [][]byte) [][]byte { r[0] = []byte{fairRecordLimits, 0, 0, 0, 0}; return r },
		"empty record":   func(r [][]byte) [][]byte { r[2] = nil; return r },
		"truncated node": func(r [][]byte) [][]byte { r[1] = r[1][:3]; return r },
	} {
		t.Run(name, func(t *testing.T) {
			recs := mangle(append([][]byte(nil), recs...))
			real := snapshotSections
			t.Cleanup(func() { snapshotSections = real })
			snapshotSections = []snapshotSection{{tag: fairSectionTag, name: "mangled",
				prepare: func(*state) (int, func(int, []byte) []byte) {
					return len(recs), func(i int, rec []byte) []byte { return append(rec, recs[i]...) }
				}}}
			snap := h.snapshot()
			snapshotSections = real
			err := New(nil).Restore(readCloser(snap))
			if !errors.Is(err, fsmwire.ErrInvalidSnapshot) || errors.Is(err, fsmwire.ErrUnsupportedVersion) {
				t.Fatalf("restored: %v", err)
			}
		})
	}
}

// A queue's counts by session and node, with and without its index, agree
// with a count of its waiters through pushes and removals of every kind.
func TestQueueCounts(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		var q queue
		next := 0
		nodes := []string{"a", "b", "c"}
		for range rapid.IntRange(1, 300).Draw(rt, "steps") {
			switch rapid.IntRange(0, 5).Draw(rt, "op") {
			case 0, 1, 2:
				next++
				s := lockinfo.SessionID(rapid.IntRange(1, 6).Draw(rt, "session"))
				q.push(waiter{session: s, owner: benchOwner(next), node: nodes[int(s)%3]})
			case 3:
				if q.len() > 0 {
					q.popFront()
				}
			case 4:
				if q.len() > 0 {
					var live []lockinfo.OwnerID
					for w := range q.all() {
						live = append(live, w.owner)
					}
					q.removeSlot(q.find(rapid.SampledFrom(live).Draw(rt, "owner")))
				}
			case 5:
				var some []lockinfo.OwnerID
				for w := range q.all() {
					if rapid.Bool().Draw(rt, "remove") {
						some = append(some, w.owner)
					}
				}
				q.removeOwners(some, func(waiter) {})
			}
			if rapid.IntRange(0, 9).Draw(rt, "clone") == 0 {
				q = q.clone()
			}
			for s := lockinfo.SessionID(1); s <= 6; s++ {
				bySession, byNode := q.countOf(s, nodes[int(s)%3])
				ws, wn := 0, 0
				for w := range q.all() {
					if w.session == s {
						ws++
					}
					if w.node == nodes[int(s)%3] {
						wn++
					}
				}
				if bySession != ws || byNode != wn {
					rt.Fatalf("session %d: counts %d, %d; the queue holds %d, %d (index: %v)", s, bySession, byNode, ws, wn, q.owners != nil)
				}
			}
		}
	})
}

// checkRecount checks that the usage kept as the state changed is the
// usage counted afresh from the state (countUsage, what a restore sets),
// and that each queue's counts by session and node are its waiters'.
func checkRecount(t tb, f *FSM) {
	t.Helper()
	f.mu.RLock()
	defer f.mu.RUnlock()
	nodes, total, acqBytes := f.st.countUsage()
	if !maps.Equal(f.st.nodes, nodes) || f.st.total != total {
		t.Fatalf("usage kept %+v (total %+v), counted %+v (total %+v)", f.st.nodes, f.st.total, nodes, total)
	}
	for id, s := range f.st.sessions.all() {
		if s.acqBytes != acqBytes[id] {
			t.Fatalf("session %d: %d bytes of acquisitions kept, %d counted", id, s.acqBytes, acqBytes[id])
		}
	}
	for name, l := range f.st.locks.all() {
		bySession, byNode := map[lockinfo.SessionID]int{}, map[string]int{}
		for w := range l.waiters.all() {
			if s := f.st.sessions.get(w.session); s == nil || w.node != s.node {
				t.Fatalf("lock %q: waiter of session %d with node %q", name, w.session, w.node)
			}
			bySession[w.session]++
			byNode[w.node]++
		}
		for w := range l.waiters.all() {
			if ws, wn := l.waiters.countOf(w.session, w.node); ws != bySession[w.session] || wn != byNode[w.node] {
				t.Fatalf("lock %q: counts %d, %d of session %d; waiters %d, %d", name, ws, wn, w.session, bySession[w.session], byNode[w.node])
			}
			if l.waiters.owners == nil {
				break // counted by a pass: one is enough
			}
		}
		if l.delayed != (l.delayNode != "" || l.delayed) {
			t.Fatalf("lock %q: a delay's node without a delay", name)
		}
	}
}
