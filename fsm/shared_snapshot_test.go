package fsm

import (
	"bufio"
	"bytes"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/raftlock/raftlock/internal/fsmwire"
)

// fuzzFixtureV3 is fuzzFixtureV2 at cluster version 3 with the primitives
// in use: readers with a writer waiting and a reader behind it, a
// semaphore with holders and a large request waiting, values.
func fuzzFixtureV3(t tb) *harness {
	h := fuzzFixtureV2(t)
	h.do(SetClusterVersion{Version: 3})
	r := h.open(time.Second, time.Second, "v3-readers")
	w := h.open(time.Second, 0, "v3-writer")
	h.entry(
		Acquire{Session: r, Lock: "rw", Owner: owner(30), Shared: true, Value: "r30", Seq: 1},
		Acquire{Session: w, Lock: "rw", Owner: owner(31), Shared: true},
		Acquire{Session: w, Lock: "rw", Owner: owner(32), Wait: true, Value: "writer"},
		Acquire{Session: r, Lock: "rw", Owner: owner(33), Wait: true, Shared: true, Seq: 2},
		Acquire{Session: r, Lock: "pool", Owner: owner(34), Limit: 3, Permits: 2, Value: "p34"},
		Acquire{Session: w, Lock: "pool", Owner: owner(35), Limit: 3, Permits: 3, Wait: true},
		Acquire{Session: w, Lock: "pool", Owner: owner(36), Limit: 3, Permits: 1, Wait: true, Value: "p36"},
		Acquire{Session: w, Lock: "leader", Owner: owner(37), Value: "w:1"},
		SetValue{Session: w, Lock: "leader", Owner: owner(37), Value: "w:2"},
		RaiseTokens{},
	)
	return h
}

func TestVersion3SnapshotRoundTrip(t *testing.T) {
	h := fuzzFixtureV3(t)
	checkInvariants(t, h.f)
	snap := h.snapshot()
	if snap[4] != snapshotV3 {
		t.Fatalf("snapshot version %d", snap[4])
	}
	f := New(nil)
	if err := f.Restore(readCloser(snap)); err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, f)
	var again bytes.Buffer
	if err := f.WriteSnapshot(&again); err != nil || !bytes.Equal(again.Bytes(), snap) {
		t.Fatalf("snapshot → restore → snapshot differs (%v)", err)
	}
	if f.Stats() != h.f.Stats() {
		t.Fatalf("stats %+v vs %+v", f.Stats(), h.f.Stats())
	}
	for _, name := range []string{"rw", "pool", "leader"} {
		a, _ := h.f.Lock(name)
		b, _ := f.Lock(name)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("%s: %+v, restored %+v", name, a, b)
		}
	}
}

// A snapshot taken before changes to shared grants keeps them as they were
// (the list of shared grants is copied on write).
func TestVersion3SnapshotIsIsolated(t *testing.T) {
	h := fuzzFixtureV3(t)
	want := h.snapshot()
	s, err := h.f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	h.do(Release{Lock: "rw", Owner: owner(30)})
	h.do(Release{Lock: "rw", Owner: owner(31)})
	h.do(Release{Lock: "pool", Owner: owner(34)})
	h.do(SetValue{Session: 7, Lock: "leader", Owner: owner(37), Value: "changed"})
	var got bytes.Buffer
	if err := s.(*snapshot).st.encode(&got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), want) {
		t.Fatal("the snapshot changed after later applies")
	}
	checkInvariants(t, h.f)
}

// Restore refuses version-3 states that apply can never reach.
func TestRestoreRefusesImpossibleVersion3States(t *testing.T) {
	for name, corrupt := range map[string]func(st *state){
		"permits over the limit": func(st *state) {
			l := st.locks.get("pool")
			l.shared.push(holder{session: 1, owner: owner(99), token: 1, permits: 2}) // holders already
		},
		"reader with a writer": func(st *state) {
			l := st.locks.get("leader")
			l.shared = newGrants()
			l.shared.push(holder{session: 1, owner: owner(98), token: 1})
		},
		"grantable head": func(st *state) {
			l := st.locks.get("pool")
			l.shared = newGrants()
			l.shared.push(holder{session: 1, owner: owner(97), token: 1, permits: 1})
			l.used = 1
			l.waiters.popFront() // the 3-permit request; 1 permit fits now
		},
		"waiter of another kind": func(st *state) {
			l := st.locks.get("rw")
			w := l.waiters.popFront()
			w.permits = 2
			l.waiters.push(w)
		},
		"cluster version below 3": func(st *state) { st.version = 2 },
	} {
		t.Run(name, func(t *testing.T) {
			h := fuzzFixtureV3(t)
			st := h.f.st.freeze()
			for n, l := range st.locks.all() { // private copies to corrupt
				c := *l
				c.shared = cloneGrants(l.shared)
				c.waiters = l.waiters.clone()
				st.locks.set(n, &c)
			}
			corrupt(st)
			var buf bytes.Buffer
			if err := st.encodeAs(&buf, snapshotV3); err != nil {
				t.Fatal(err)
			}
			err := New(nil).Restore(readCloser(buf.Bytes()))
			if !errors.Is(err, fsmwire.ErrInvalidSnapshot) {
				t.Fatalf("restored: %v", err)
			}
			t.Log(err)
		})
	}
}

// Shared grants and waiters past a record's worth each, with values of the
// largest size, snapshot and restore (continuation records), and no record
// comes near the record limit.
func TestLargeSharedListsSnapshotRestore(t *testing.T) {
	h := newHarness(t)
	h.f, h.rec = New(nil), nil
	h.do(SetClusterVersion{Version: 3})
	s := h.open(time.Minute, 0, "many")
	value := string(bytes.Repeat([]byte{'v'}, fsmwire.MaxValueLen))
	n := 2*itemsPerRecord + 3
	var batch []Command
	flush := func() { h.entry(batch...); batch = batch[:0] }
	for i := range n {
		batch = append(batch, Acquire{Session: s, Lock: "rw", Owner: ownerN(i + 10), Shared: true, Value: value})
		if len(batch) == 4096 {
			flush()
		}
	}
	batch = append(batch, Acquire{Session: s, Lock: "rw", Owner: ownerN(1), Wait: true, Value: value})
	for i := range itemsPerRecord + 1 {
		batch = append(batch, Acquire{Session: s, Lock: "rw", Owner: ownerN(n + i + 10), Wait: true, Shared: true, Value: value})
		if len(batch) == 4096 {
			flush()
		}
	}
	flush()
	snap := h.snapshot()
	f := New(nil)
	if err := f.Restore(readCloser(snap)); err != nil {
		t.Fatalf("snapshot of %d bytes: %v", len(snap), err)
	}
	var again bytes.Buffer
	if err := f.WriteSnapshot(&again); err != nil || !bytes.Equal(again.Bytes(), snap) {
		t.Fatalf("restored state snapshots differently (%v)", err)
	}
	if st := f.Stats(); st.Readers != n || st.Waiters != itemsPerRecord+2 {
		t.Fatalf("restored %+v", st)
	}
	if biggest := largestRecord(t, snap); biggest > 10<<20 {
		t.Fatalf("a record of %d bytes", biggest)
	}
}

// largestRecord walks the records of a version-2/3 snapshot.
func largestRecord(t *testing.T, snap []byte) int {
	sr := &snapReader{r: bufio.NewReader(bytes.NewReader(snap[5 : len(snap)-4])), maxRec: maxSnapshotRecord}
	biggest := 0
	for {
		d, err := sr.record()
		if err != nil {
			return biggest
		}
		biggest = max(biggest, len(d.B))
	}
}
