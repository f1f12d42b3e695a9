package fsm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/lockinfo"
)

// origins returns every live session's origin marker (SessionTTLs).
func origins(f *FSM) map[lockinfo.SessionID]uint64 {
	out := map[lockinfo.SessionID]uint64{}
	for _, s := range allSessionTTLs(f) {
		out[s.ID] = s.Origin
	}
	return out
}

// markerEvents counts the EventMarker events recorded since the last take,
// checking that each names its entry.
func markerEvents(t *testing.T, h *harness) []uint64 {
	t.Helper()
	var at []uint64
	for _, e := range h.rec.take() {
		if e.Kind == fsmwire.EventMarker {
			at = append(at, e.Index)
		}
	}
	return at
}

// A session's origin is the first takeover marker after the entry that last
// renewed it: its OpenSession, a Renewed naming it, or nothing yet.
func TestRenewalsAndMarkersGiveEachSessionItsOrigin(t *testing.T) {
	h := newHarness(t)
	h.do(SetClusterVersion{Version: 4})
	a := h.open(time.Second, 0, "a")
	b := h.open(time.Second, 0, "b")
	h.rec.take()

	// No marker yet (a Tick is none: a version-1 lock-delay Tick applied
	// after the version was raised must not be taken for a takeover):
	// nobody is marked.
	h.do(Tick{})
	if o := origins(h.f); o[a] != 0 || o[b] != 0 || len(markerEvents(t, h)) != 0 {
		t.Fatalf("origins before any marker: %v", o)
	}
	h.do(Takeover{})
	m1 := h.index
	if got := markerEvents(t, h); len(got) != 1 || got[0] != m1 {
		t.Fatalf("marker events %v, want [%d]", got, m1)
	}
	if o := origins(h.f); o[a] != m1 || o[b] != m1 {
		t.Fatalf("origins after the first marker: %v, want %d", o, m1)
	}
	// a renews; b stays silent; c opens after the marker.
	r := h.do(Renewed{Sessions: []lockinfo.SessionID{a, 999}})
	if r.Status != fsmwire.StatusOK || r.Count != 1 {
		t.Fatalf("Renewed: %+v (want 1 session renewed, the unknown one skipped)", r)
	}
	c := h.open(time.Second, 0, "c")
	if o := origins(h.f); o[a] != 0 || o[b] != m1 || o[c] != 0 {
		t.Fatalf("origins after a renewal: %v, want a 0, b %d, c 0", o, m1)
	}
	h.entry(Takeover{}, Noop{}, Takeover{}) // one entry, one marker
	m2 := h.index
	if got := markerEvents(t, h); len(got) != 1 || got[0] != m2 {
		t.Fatalf("marker events %v, want [%d]", got, m2)
	}
	h.do(Takeover{})
	if o := origins(h.f); o[a] != m2 || o[b] != m1 || o[c] != m2 {
		t.Fatalf("origins after three markers: %v, want a %d, b %d (its first marker), c %d", o, m2, m1, m2)
	}
	// A renewal in the entry of a marker: not marked by it (the marker
	// does not follow it).
	h.entry(Takeover{}, Renewed{Sessions: []lockinfo.SessionID{b}})
	if o := origins(h.f); o[b] != 0 {
		t.Fatalf("origin of a session renewed in a marker's entry: %d", o[b])
	}
}

// Below cluster version 4 a Tick is no marker, and Renewed and Takeover
// are refused (changing nothing); an entry of version 4 carrying them
// needs version 4 to be written at all.
func TestRenewedNeedsVersion4(t *testing.T) {
	h := newHarness(t)
	h.do(SetClusterVersion{Version: 3})
	s := h.open(time.Second, 0, "s")
	h.do(Tick{})
	if got := markerEvents(t, h); len(got) != 0 || origins(h.f)[s] != 0 {
		t.Fatalf("a Tick at version 3 made a marker: %v %v", got, origins(h.f))
	}
	for _, c := range []Command{Renewed{Sessions: []lockinfo.SessionID{s}}, Takeover{}} {
		before := h.content()
		if r := h.do(c); r.Status != fsmwire.StatusInvalid {
			t.Fatalf("%s at version 3: %+v", c.op(), r)
		}
		if h.content() != before || len(markerEvents(t, h)) != 0 {
			t.Fatalf("a refused %s changed the state", c.op())
		}
		if NeedsVersion(c) != 4 || !c.op().LeaderOnly() {
			t.Fatalf("%s needs version %d, leader only %v", c.op(), NeedsVersion(c), c.op().LeaderOnly())
		}
	}
	if err := (Renewed{Sessions: []lockinfo.SessionID{0}}).validate(); !errors.Is(err, fsmwire.ErrInvalidCommand) {
		t.Fatalf("Renewed of session 0: %v", err)
	}
	if err := (Renewed{Sessions: make([]lockinfo.SessionID, fsmwire.MaxExpireSessions+1)}).validate(); !errors.Is(err, fsmwire.ErrInvalidCommand) {
		t.Fatalf("oversized Renewed: %v", err)
	}
	b, err := EncodeEntry(Entry{Commands: []Command{Renewed{Sessions: []lockinfo.SessionID{s}}}})
	if err != nil || b[0] != fsmwire.EntryV4 {
		t.Fatalf("Renewed encoded in entry version %d (%v)", b[0], err)
	}
	b[0] = fsmwire.EntryV3
	if _, err := DecodeEntry(b); !errors.Is(err, fsmwire.ErrUnsupportedVersion) {
		t.Fatalf("Renewed in an entry of version 3: %v", err)
	}
}

// The state keeps the newest maxMarkers markers; a session whose first
// marker was pruned takes the oldest kept (later: safe).
func TestMarkersArePrunedToTheNewest(t *testing.T) {
	h := newHarness(t)
	h.do(SetClusterVersion{Version: 4})
	s := h.open(time.Second, 0, "silent")
	var all []uint64
	for range maxMarkers + 6 {
		h.do(Takeover{})
		all = append(all, h.index)
	}
	kept := all[len(all)-maxMarkers:]
	if got := h.f.st.markers; len(got) != maxMarkers || got[0] != kept[0] || got[maxMarkers-1] != kept[maxMarkers-1] {
		t.Fatalf("markers kept %v…, want %d from %d", got[:3], maxMarkers, kept[0])
	}
	if o := origins(h.f)[s]; o != kept[0] {
		t.Fatalf("origin %d, want the oldest marker kept %d", o, kept[0])
	}
}

// renewedFixture is a version-4 state with markers, a renewed session, a
// silent one and one opened after the last marker.
func renewedFixture(t tb) *harness {
	h := fuzzFixtureV4(t)
	silent := h.open(time.Second, time.Second, "silent")
	h.do(Takeover{})
	renewed := h.open(time.Second, 0, "renewed")
	h.do(Takeover{})
	h.do(Renewed{Sessions: []lockinfo.SessionID{renewed, silent + 100}})
	h.open(time.Second, 0, "fresh")
	return h
}

// Markers and renewals survive a snapshot: same origins, same bytes again;
// a state without either writes no section (the bytes of a version-4
// snapshot from before the section existed).
func TestRenewalsSnapshotRoundTrip(t *testing.T) {
	h := renewedFixture(t)
	snap := h.snapshot()
	f := New(nil)
	if err := f.Restore(readCloser(snap)); err != nil {
		t.Fatal(err)
	}
	if got, want := origins(f), origins(h.f); len(got) != len(want) {
		t.Fatalf("origins %v, want %v", got, want)
	} else {
		for id, o := range want {
			if got[id] != o {
				t.Fatalf("session %d: origin %d after restore, want %d", id, got[id], o)
			}
		}
	}
	var again bytes.Buffer
	if err := f.WriteSnapshot(&again); err != nil || !bytes.Equal(again.Bytes(), snap) {
		t.Fatalf("snapshot → restore → snapshot differs (%v)", err)
	}
	plain := fuzzFixtureV3(t)
	plain.do(SetClusterVersion{Version: 4})
	if secs := plain.f.st.sectionsToWrite(); len(secs) != 0 {
		t.Fatalf("a state without markers or renewals writes %d sections", len(secs))
	}
	// Many renewed sessions: several records, all but the last full.
	big := newHarness(t)
	big.do(SetClusterVersion{Version: 4})
	var ids []lockinfo.SessionID
	for range renewalsPerRecord + 5 {
		ids = append(ids, big.open(time.Second, 0, ""))
	}
	big.do(Renewed{Sessions: ids})
	big.do(Takeover{})
	snap = big.snapshot()
	f = New(nil)
	if err := f.Restore(readCloser(snap)); err != nil {
		t.Fatal(err)
	}
	again.Reset()
	if err := f.WriteSnapshot(&again); err != nil || !bytes.Equal(again.Bytes(), snap) {
		t.Fatalf("large renewals: snapshot → restore → snapshot differs (%v)", err)
	}
	if o := origins(f)[ids[renewalsPerRecord+4]]; o != big.index {
		t.Fatalf("origin after restore %d, want %d", o, big.index)
	}
}

// The renewals section's decoder refuses what no state machine writes.
func TestRenewalsSectionRefusesBadRecords(t *testing.T) {
	h := renewedFixture(t)
	markers, index := h.f.st.markers, h.index
	var renewed lockinfo.SessionID
	for id, s := range h.f.st.sessions.all() {
		if s.renewedAt != s.createdIdx {
			renewed = id
		}
	}
	st := h.f.st
	uv := func(vs ...uint64) []byte {
		var b []byte
		for _, v := range vs {
			b = binary.AppendUvarint(b, v)
		}
		return b
	}
	created := st.sessions.get(renewed).createdIdx
	cases := map[string]struct {
		i, n int
		rec  []byte
	}{
		"markers out of order":    {0, 1, uv(2, markers[1], markers[0])},
		"marker beyond the index": {0, 1, uv(1, index+1)},
		"marker zero":             {0, 1, uv(1, 0)},
		"too many markers":        {0, 1, uv(maxMarkers + 1)},
		"unknown session":         {1, 2, uv(1, 9999, index)},
		"renewed at its open":     {1, 2, uv(1, uint64(renewed), created)},
		"renewed beyond index":    {1, 2, uv(1, uint64(renewed), index+1)},
		"empty record":            {1, 2, uv(0)},
		"short record not last":   {1, 3, uv(1, uint64(renewed), index)},
	}
	snap := h.snapshot()
	fresh := func(t *testing.T) *state { // a state decoded from the fixture's snapshot, its own
		f := New(nil)
		if err := f.Restore(readCloser(snap)); err != nil {
			t.Fatal(err)
		}
		return f.st
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			d := newDecoder(c.rec)
			beginRenewals(fresh(t))(c.i, c.n, &d)
			if d.End() == nil {
				t.Fatal("accepted")
			}
		})
	}
	t.Run("out of order across records", func(t *testing.T) {
		dec := beginRenewals(fresh(t))
		for k, want := range []bool{true, false} { // the same session in two records
			d := newDecoder(uv(1, uint64(renewed), index))
			dec(2, 3, &d)
			if ok := d.End() == nil; ok != want {
				t.Fatalf("record %d: accepted %v, want %v", k, ok, want)
			}
		}
	})
}

// A restore (at cluster version 4) renews every restored session at the
// index it is installed at and keeps the running cluster's markers: the
// backup's indices are of another log.
func TestRestoreRenewsEverySessionAtItsIndex(t *testing.T) {
	backup := renewedFixture(t).snapshot()
	cur := newHarness(t)
	cur.do(SetClusterVersion{Version: 4})
	for range 3 {
		cur.do(Takeover{})
	}
	cur.open(time.Second, 0, "replaced")
	curMarkers := cur.f.st.markers
	f, _, _ := restoreInto(t, cur, backup)
	if got := f.st.markers; len(got) != len(curMarkers) || got[len(got)-1] != curMarkers[len(curMarkers)-1] {
		t.Fatalf("markers %v after restore, want the running cluster's %v", got, curMarkers)
	}
	for _, s := range f.st.sessions.all() {
		if s.renewedAt != cur.index {
			t.Fatalf("session %d renewed at %d, want the restore's index %d", s.id, s.renewedAt, cur.index)
		}
	}
	for id, o := range origins(f) {
		if o != 0 {
			t.Fatalf("session %d marked (%d) right after a restore", id, o)
		}
	}
}

// The same log gives the same snapshot bytes, renewals and markers
// included (when a replica applied a marker is not state).
func TestRenewalsSameLogSameSnapshotBytes(t *testing.T) {
	a, b := renewedFixture(t), renewedFixture(t)
	if len(a.f.st.markers) == 0 || len(a.f.st.sectionsToWrite()) == 0 {
		t.Fatal("the fixture has no renewals section")
	}
	if !bytes.Equal(a.snapshot(), b.snapshot()) || a.digest() != b.digest() {
		t.Fatal("same log, different snapshots")
	}
}
