package fsm

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/lockinfo"
)

var sampleCommands = []Command{
	OpenSession{TTL: 10 * time.Second, LockDelay: time.Second, Description: "node-a/pid 42"},
	OpenSession{TTL: time.Millisecond},
	CloseSession{Session: 7},
	ExpireSessions{Sessions: []lockinfo.SessionID{1, 2, 1 << 40}},
	ExpireSessions{},
	Acquire{Session: 3, Lock: "invoice:842", Owner: owner(1), Wait: true},
	Acquire{Session: 1 << 50, Lock: "ü", Owner: owner(2)},
	Release{Lock: "invoice:842", Owner: owner(1)},
	Tick{},
	Noop{},
	// Version 2.
	Acquire{Session: 3, Lock: "a", Owner: owner(3), Wait: true, Seq: 9, AckBelow: 7},
	Release{Session: 3, Lock: "a", Owner: owner(3), Seq: 10, AckBelow: 8},
	Release{Session: 3, Lock: "a", Owner: owner(3)},
	CloseSession{Session: 3, Seq: 11, AckBelow: 11},
	EndDelay{Delays: []DelayRef{{Lock: "ü", Token: 3}, {Lock: "b", Token: 0}}},
	EndDelay{},
	SetLimits{Limits: DefaultLimits()},
	SetLimits{},
	SetClusterVersion{Version: 2},
	InitCluster{ID: "cluster-7f3a"},
	// Version 3.
	Acquire{Session: 3, Lock: "rw", Owner: owner(4), Wait: true, Shared: true, Seq: 12, AckBelow: 12},
	Acquire{Session: 3, Lock: "pool", Owner: owner(5), Limit: 4, Permits: 2, Value: "worker-7"},
	Acquire{Session: 3, Lock: "leader", Owner: owner(6), Value: "a:7400"},
	SetValue{Session: 3, Lock: "leader", Owner: owner(6), Value: "a:7401", Seq: 13, AckBelow: 12},
	SetValue{Session: 3, Lock: "leader", Owner: owner(6)},
	RaiseTokens{},
	Revoke{Lock: "invoice:842", Token: 17, By: "admin (bearer ops)", Why: "holder stuck"},
	SetClusterVersion{Version: 3},
	// Version 4.
	CloseSession{Session: 3, Seq: 14, AckBelow: 13, Lapsed: true},
	CloseSession{Session: 1 << 40, Lapsed: true},
	Release{Session: 3, Lock: "invoice:842", Owner: owner(1), Seq: 15, AckBelow: 14, Lapsed: true},
	Release{Session: 3, Lock: "ü", Owner: owner(2), Lapsed: true},
	// The fair shares' forms.
	SetLimits{Limits: DefaultLimits().withoutFair()},
	SetLimits{Limits: Limits{MaxStateBytes: 1 << 40, NodeShares: 1024}},
	OpenSession{TTL: time.Second, Description: "http@n1", Node: "n1", Reserved: true},
	OpenSession{TTL: time.Second, Node: "?n2"},
	OpenSession{TTL: time.Second, Reserved: true},
	Renewed{Sessions: []lockinfo.SessionID{3, 1 << 40}},
	Renewed{},
	Takeover{},
	SetClusterVersion{Version: 4},
	RestoreChunk{ID: [16]byte{1, 2}, Offset: 0, Total: 9, Data: []byte("RLKS\x04")},
	RestoreChunk{ID: [16]byte{0xfe, 15: 2}, Offset: 100, Total: 1 << 20, Data: []byte{0, 1, 2}},
	RestoreCommit{ID: [16]byte{0xfe, 15: 1}, Size: 1 << 20},
	RestoreAbort{ID: [16]byte{0xfe, 15: 2}},
}

func TestEntryRoundTrip(t *testing.T) {
	for i, c := range sampleCommands {
		e := Entry{At: epoch + int64(i), Commands: []Command{c}}
		b, err := EncodeEntry(e)
		if err != nil {
			t.Fatalf("%T: %v", c, err)
		}
		got, err := DecodeEntry(b)
		if err != nil {
			t.Fatalf("%T: %v", c, err)
		}
		if !reflect.DeepEqual(got, e) {
			t.Fatalf("round trip: %+v → %+v", e, got)
		}
	}
	batch := Entry{At: -5, Commands: sampleCommands}
	b, err := EncodeEntry(batch)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := DecodeEntry(b); err != nil || !reflect.DeepEqual(got, batch) {
		t.Fatalf("batch round trip: %v %+v", err, got)
	}
}

func TestEncodeRefusesUnrepresentableEntries(t *testing.T) {
	if _, err := EncodeEntry(Entry{}); !errors.Is(err, fsmwire.ErrInvalidEntry) {
		t.Fatalf("empty entry: %v", err)
	}
	if _, err := EncodeEntry(Entry{Commands: []Command{nil}}); !errors.Is(err, fsmwire.ErrInvalidEntry) {
		t.Fatalf("nil command: %v", err)
	}
	big := make([]lockinfo.SessionID, fsmwire.MaxExpireSessions+1)
	if _, err := EncodeEntry(Entry{Commands: []Command{ExpireSessions{Sessions: big}}}); !errors.Is(err, fsmwire.ErrInvalidEntry) {
		t.Fatalf("oversized expire: %v", err)
	}
}

func TestDecodeRejectsGarbage(t *testing.T) {
	valid, _ := EncodeEntry(Entry{At: 1, Commands: []Command{Acquire{Session: 1, Lock: "l", Owner: owner(1), Wait: true}}})
	cases := map[string][]byte{
		"empty":           nil,
		"bad version":     append([]byte{9}, valid[1:]...),
		"truncated":       valid[:len(valid)-1],
		"trailing":        append(append([]byte{}, valid...), 0),
		"unknown flags":   append(append([]byte{}, valid[:len(valid)-1]...), 2),
		"unknown op":      {1, 0, 1, 200},
		"zero commands":   {1, 0, 0},
		"huge count":      {1, 0, 0xff, 0xff, 0xff, 0xff, 0x0f},
		"huge string":     {1, 0, 1, byte(fsmwire.OpRelease), 0xff, 0xff, 0x03},
		"overlong varint": {1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
	}
	for name, b := range cases {
		if _, err := DecodeEntry(b); !errors.Is(err, fsmwire.ErrInvalidEntry) {
			t.Errorf("%s: err = %v", name, err)
		}
	}
}

// FuzzDecodeEntry: decoding never panics; whatever decodes re-encodes to the
// same commands; applying any entry (decodable or not) keeps the invariants,
// and an undecodable one changes nothing.
func FuzzDecodeEntry(f *testing.F) {
	for _, c := range sampleCommands {
		b, _ := EncodeEntry(Entry{At: epoch, Commands: []Command{c}})
		f.Add(b)
	}
	b, _ := EncodeEntry(Entry{At: epoch, Commands: sampleCommands})
	f.Add(b)
	f.Add([]byte{1, 0, 1, 200})
	f.Add([]byte{})
	f.Add([]byte{3, 0, 1, byte(fsmwire.OpAcquire), 1, 1, 'a', 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0x0e, 0, 0, 2, 1, 1, 'v'})
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzApply(t, fuzzFixture(t), data)         // the commands of every version, at cluster version 1
		fuzzApply(t, fuzzFixtureV3(t), data)       // and at version 3, with the primitives in use
		fuzzApply(t, fairFixture(t), data)         // and at version 4 (the lapsed forms, Revoke of shared grants, the fair shares in use)
		fuzzApply(t, fuzzFixtureRestores(t), data) // and at version 4 with a restore installed and one staging
	})
}

// fuzzApply checks what FuzzDecodeEntry promises on one state.
func fuzzApply(t *testing.T, h *harness, data []byte) {
	e, err := DecodeEntry(data)
	if err != nil {
		if !errors.Is(err, fsmwire.ErrInvalidEntry) {
			t.Fatalf("error does not wrap ErrInvalidEntry: %v", err)
		}
		before := h.digest()
		if resp := h.f.applyEntry(h.index, data); resp.Err == nil {
			t.Fatal("apply accepted what decode refused")
		}
		if h.digest() != before {
			t.Fatal("a rejected entry changed the state")
		}
		if errors.Is(err, fsmwire.ErrUnsupportedVersion) != errors.Is(h.f.Halted(), ErrHalted) {
			t.Fatalf("decode error %v, halted %v", err, h.f.Halted())
		}
		return
	}
	b, err := EncodeEntry(e)
	if err != nil {
		t.Fatalf("re-encode: %v", err)
	}
	e2, err := DecodeEntry(b)
	if err != nil || !reflect.DeepEqual(e, e2) {
		t.Fatalf("round trip: %v\n%+v\n%+v", err, e, e2)
	}
	h.index++
	if e.unsupported() != nil { // decodable, but not applicable by this binary
		if resp := h.f.applyEntry(h.index, data); !errors.Is(resp.Err, ErrHalted) {
			t.Fatalf("apply of an unsupported entry: %+v", resp)
		}
		return
	}
	if resp := h.f.applyEntry(h.index, data); resp.Err != nil || len(resp.Results) != len(e.Commands) {
		t.Fatalf("apply: %+v", resp)
	}
	checkInvariants(t, h.f)
}

// fuzzFixture is a state with sessions 1..3, a held lock with waiters and a
// delayed lock, so that fuzzed commands have something to act on.
func fuzzFixture(t tb) *harness {
	h := newHarness(t)
	a := h.open(time.Second, time.Second, "a")
	b := h.open(time.Second, 0, "b")
	c := h.open(time.Second, time.Second, "c")
	h.entry(
		Acquire{Session: a, Lock: "invoice:842", Owner: owner(1)},
		Acquire{Session: b, Lock: "invoice:842", Owner: owner(2), Wait: true},
		Acquire{Session: c, Lock: "ü", Owner: owner(3)},
		Acquire{Session: b, Lock: "ü", Owner: owner(4), Wait: true},
		ExpireSessions{Sessions: []lockinfo.SessionID{c}},
	)
	return h
}

// checkInvariants checks what must hold in every reachable state.
func checkInvariants(t tb, f *FSM) {
	t.Helper()
	held, waiters, readers, semHolders, permits, semaphores := 0, 0, 0, 0, 0, 0
	for _, li := range allLocks(f) {
		seen := map[lockinfo.OwnerID]bool{}
		if li.Held {
			held++
			if _, ok := f.Session(li.Holder.Session); !ok || li.Holder.Token == 0 {
				t.Fatalf("lock %q: bad holder %+v", li.Name, li.Holder)
			}
			seen[li.Holder.Owner] = true
		} else if !li.Delayed && len(li.Shared) == 0 {
			t.Fatalf("lock %q: neither held nor delayed but present (%d waiters)", li.Name, len(li.Waiters))
		}
		used := 0
		for i, g := range li.Shared {
			if _, ok := f.Session(g.Session); !ok || g.Token == 0 || seen[g.Owner] || (i > 0 && g.Token <= li.Shared[i-1].Token) ||
				li.Held || li.Delayed || (li.Limit > 0) != (g.Permits > 0) {
				t.Fatalf("lock %q: bad shared grant %+v", li.Name, g)
			}
			seen[g.Owner] = true
			used += g.Permits
		}
		if li.Limit > 0 {
			semaphores++
			semHolders += len(li.Shared)
			permits += used
		} else {
			readers += len(li.Shared)
		}
		if used != li.Used || (li.Limit > 0 && used > li.Limit) {
			t.Fatalf("lock %q: %d permits held of %d, counted %d", li.Name, li.Used, li.Limit, used)
		}
		if l := f.st.locks.get(li.Name); l.waiters.len() > 0 && l.admits(l.waiters.first()) {
			t.Fatalf("lock %q: the head of the queue could be granted: %+v", li.Name, li)
		}
		for _, w := range li.Waiters {
			waiters++
			if _, ok := f.Session(w.Session); !ok || seen[w.Owner] {
				t.Fatalf("lock %q: bad waiter %+v", li.Name, w)
			}
			seen[w.Owner] = true
		}
	}
	if st := f.Stats(); st.Held != held || st.Waiters != waiters || st.Readers != readers || st.SemaphoreHolders != semHolders ||
		st.PermitsHeld != permits || st.Semaphores != semaphores {
		t.Fatalf("stats %+v, counted held %d waiters %d readers %d semaphore holders %d permits %d semaphores %d",
			st, held, waiters, readers, semHolders, permits, semaphores)
	}
	r := f.st.restores
	if s := r.staging; s != nil && (s.size != stagedSize(s.chunks) || s.size > s.total || s.total > fsmwire.MaxRestoreStaged || s.last > f.st.index) {
		t.Fatalf("staging of %d bytes in chunks of %d, of %d, last %d", s.size, stagedSize(s.chunks), s.total, s.last)
	}
	for i, in := range r.installed {
		if len(r.installed) > restoreHistory || in.index > f.st.index || (i > 0 && in.index <= r.installed[i-1].index) {
			t.Fatalf("installed restores %+v", r.installed)
		}
	}
	// Every session's index lists exactly the acquisitions it holds or waits
	// for.
	want := map[lockinfo.SessionID]map[acqKey]bool{}
	add := func(s lockinfo.SessionID, k acqKey) {
		if want[s] == nil {
			want[s] = map[acqKey]bool{}
		}
		want[s][k] = true
	}
	for name, l := range f.st.locks.all() {
		if l.held {
			add(l.holder.session, acqKey{name, l.holder.owner})
		}
		for g := range l.shared.all() {
			add(g.session, acqKey{name, g.owner})
		}
		for w := range l.waiters.all() {
			add(w.session, acqKey{name, w.owner})
		}
		checkSlots(t, name+" queue", &l.waiters)
		if l.shared != nil {
			checkSlots(t, name+" shared grants", l.shared)
			if l.shared.len() == 0 {
				t.Fatalf("lock %q: an empty list of shared grants", name)
			}
		}
	}
	checkRecount(t, f)
	for id, s := range f.st.sessions.all() {
		if len(want[id]) != len(s.acqs) {
			t.Fatalf("session %d indexes %d acquisitions, has %d", id, len(s.acqs), len(want[id]))
		}
		for k := range s.acqs {
			if !want[id][k] {
				t.Fatalf("session %d indexes %+v without holding or waiting", id, k)
			}
		}
	}
}

// checkSlots checks a slots list: it counts its live items, its keys
// (tombstones' included) never decrease from head on — what a listing's
// cursor relies on — and its owner index, if any, points at every live
// item and nothing else.
func checkSlots[T any, P slot[T]](t tb, what string, q *slots[T, P]) {
	t.Helper()
	live := 0
	for i := q.head; i < len(q.items); i++ {
		it := P(&q.items[i])
		if i > q.head && it.slotKey() < P(&q.items[i-1]).slotKey() {
			t.Fatalf("%s: key %d after %d (slot %d)", what, it.slotKey(), P(&q.items[i-1]).slotKey(), i)
		}
		if o := it.slotOwner(); !o.IsZero() {
			live++
			if j, ok := q.owners[o]; q.owners != nil && (!ok || j != i) {
				t.Fatalf("%s: owner index has %s at %d (%v), it is at %d", what, o, j, ok, i)
			}
		}
	}
	if live != q.len() || (q.owners != nil && len(q.owners) != live) {
		t.Fatalf("%s: counts %d live items, holds %d (index %d)", what, q.len(), live, len(q.owners))
	}
}

var sampleResults = []Result{
	{Status: fsmwire.StatusOK, Session: 9},
	{Status: fsmwire.StatusGranted, Session: 3, Token: 1 << 40},
	{Status: fsmwire.StatusQueued, Session: 3, Position: 17},
	{Status: fsmwire.StatusLocked, Session: 2, Holder: lockinfo.Holder{Session: 1, Owner: owner(7), Token: 5, AcquiredAt: -3, AcquiredIdx: 99, Description: "node-a"}, DelayUntil: epoch},
	{Status: fsmwire.StatusNotHolder},
	{Status: fsmwire.StatusNoSession},
	{Status: fsmwire.StatusOK, Count: 12},
	{Status: fsmwire.StatusInvalid, Reason: "fsm: invalid command: empty lock name"},
	{Status: fsmwire.StatusStale, Session: 4},
	{Status: fsmwire.StatusQuota, Quota: fsmwire.QuotaWaiters, Reason: "10000 waiters on lock \"x\" (limit 10000)"},
	{Status: fsmwire.StatusConflict, Session: 3, Count: 4, Reason: "semaphore \"pool\" has a limit of 4, not 5"},
	{Status: fsmwire.StatusLocked, Session: 3, Count: 1},
}

func TestResultRoundTrip(t *testing.T) {
	var b []byte
	for _, r := range sampleResults {
		b = AppendResult(b, r)
	}
	for i, want := range sampleResults {
		got, rest, err := DecodeResult(b)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("result %d: %v %+v, want %+v", i, err, got, want)
		}
		b = rest
	}
	if len(b) != 0 {
		t.Fatalf("%d bytes left", len(b))
	}
}

// FuzzDecodeResult: no panic; what decodes re-encodes to the same result.
func FuzzDecodeResult(f *testing.F) {
	for _, r := range sampleResults {
		f.Add(AppendResult(nil, r))
	}
	f.Add([]byte{0})
	f.Fuzz(func(t *testing.T, data []byte) {
		r, rest, err := DecodeResult(data)
		if err != nil {
			if !errors.Is(err, fsmwire.ErrInvalidEntry) {
				t.Fatalf("error does not wrap ErrInvalidEntry: %v", err)
			}
			return
		}
		if len(rest) > len(data) {
			t.Fatal("rest longer than input")
		}
		r2, rest2, err := DecodeResult(AppendResult(nil, r))
		if err != nil || len(rest2) != 0 || !reflect.DeepEqual(r, r2) {
			t.Fatalf("round trip: %v %+v %+v", err, r, r2)
		}
	})
}
