package fsm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"
	"time"

	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/lockinfo"
)

func TestSnapshotRestoreRoundTrip(t *testing.T) {
	h := fuzzFixture(t)
	snap := h.snapshot()
	rec := &recorder{}
	f := New(rec)
	if err := f.Restore(readCloser(snap)); err != nil {
		t.Fatal(err)
	}
	if len(rec.restored) != 1 || rec.restored[0] != h.index {
		t.Fatalf("observer told %v, want [%d]", rec.restored, h.index)
	}
	var again bytes.Buffer
	if err := f.WriteSnapshot(&again); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again.Bytes(), snap) {
		t.Fatal("snapshot → restore → snapshot differs")
	}
	if f.Stats() != h.f.Stats() {
		t.Fatalf("stats %+v vs %+v", f.Stats(), h.f.Stats())
	}
	// The restored state keeps working, with tokens continuing from the counter.
	h2 := &harness{t: t, f: f, rec: rec, index: h.index, now: h.now}
	before := f.Stats().LastToken
	h2.do(Release{Lock: "invoice:842", Owner: owner(1)})
	if hd := wantHolder(t, f, "invoice:842", owner(2)); hd.Token != before+1 {
		t.Fatalf("token after restore %d, want %d", hd.Token, before+1)
	}
	checkInvariants(t, f)
}

// A snapshot taken before changes persists the state as it was then: objects
// shared with the snapshot are copied before they change.
func TestSnapshotIsIsolatedFromLaterChanges(t *testing.T) {
	h := fuzzFixture(t)
	want := h.snapshot()
	s, err := h.f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	h.do(Release{Lock: "invoice:842", Owner: owner(1)})
	h.do(Acquire{Session: 2, Lock: "invoice:842", Owner: owner(9), Wait: true})
	h.do(CloseSession{Session: 2})
	h.do(OpenSession{TTL: time.Second})
	h.advance(time.Hour)
	h.do(Tick{})
	var got bytes.Buffer
	if err := s.(*snapshot).st.encode(&got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), want) {
		t.Fatal("the snapshot changed after later applies")
	}
}

func TestSameLogSameSnapshotBytes(t *testing.T) {
	build := func() []byte { return fuzzFixture(t).snapshot() }
	if !bytes.Equal(build(), build()) {
		t.Fatal("same log, different snapshots")
	}
	i1, d1 := fuzzFixture(t).f.Digest()
	i2, d2 := fuzzFixture(t).f.Digest()
	if i1 != i2 || d1 != d2 {
		t.Fatal("same log, different digests")
	}
}

func TestRestoreRejectsBadSnapshotsAndKeepsState(t *testing.T) {
	good := fuzzFixture(t).snapshot()
	fix := func(b []byte) []byte { // recompute the checksum so validation, not the CRC, is tested
		out := append([]byte{}, b...)
		binary.BigEndian.PutUint32(out[len(out)-4:], crc32.Checksum(out[:len(out)-4], crcTable))
		return out
	}
	flip := func(i int) []byte { b := append([]byte{}, good...); b[i] ^= 0x40; return b }
	cases := map[string][]byte{
		"empty":        nil,
		"bad magic":    fix(flip(0)),
		"bad version":  fix(func() []byte { b := append([]byte{}, good...); b[4] = 9; return b }()),
		"bad checksum": flip(len(good) - 1),
		"flipped byte": flip(len(good) / 2),
		"truncated":    good[:len(good)-5],
		"trailing":     append(append([]byte{}, good...), 0),
	}
	// A lock whose holder session does not exist: rewrite the meta record to
	// claim zero sessions.
	{
		h := newHarness(t)
		s := h.open(time.Second, 0, "")
		h.do(Acquire{Session: s, Lock: "l", Owner: owner(1)})
		snap := h.snapshot()
		var meta []byte
		meta = binary.AppendUvarint(meta, h.index)
		meta = binary.AppendVarint(meta, h.now)
		meta = binary.AppendUvarint(meta, 1)
		meta = binary.AppendUvarint(meta, 1)
		meta = binary.AppendUvarint(meta, 0) // sessions
		meta = binary.AppendUvarint(meta, 1) // locks
		// skip header + original meta record + session record
		rd := bytes.NewReader(snap[5:])
		skip := func() { n, _ := binary.ReadUvarint(rd); rd.Seek(int64(n), 1) }
		skip()
		skip()
		rest := snap[len(snap)-rd.Len():]
		b := append([]byte{}, snap[:5]...)
		b = binary.AppendUvarint(b, uint64(len(meta)))
		b = append(b, meta...)
		b = append(b, rest...)
		cases["orphan holder"] = fix(b)
	}
	for name, b := range cases {
		h := fuzzFixture(t)
		before := h.digest()
		err := h.f.Restore(readCloser(b))
		if !errors.Is(err, fsmwire.ErrInvalidSnapshot) {
			t.Errorf("%s: err = %v", name, err)
		}
		if h.digest() != before {
			t.Errorf("%s: failed restore changed the state", name)
		}
		// An unknown version halts (never skipped); garbage does not.
		if unknown := name == "bad version"; unknown != errors.Is(h.f.Halted(), ErrHalted) || unknown != errors.Is(err, fsmwire.ErrUnsupportedVersion) {
			t.Errorf("%s: err %v, halted %v", name, err, h.f.Halted())
		}
		if len(h.rec.restored) != 0 {
			t.Errorf("%s: observer told of a failed restore", name)
		}
	}
}

// FuzzRestore: restoring arbitrary bytes (with a valid checksum, so that the
// fuzzer explores the parser) never panics; failures change nothing; successes
// give a state that satisfies the invariants and snapshots canonically.
func FuzzRestore(f *testing.F) {
	f.Add(fuzzFixture(f).snapshot())
	f.Add(fuzzFixtureV2(f).snapshot())
	f.Add(fuzzFixtureV3(f).snapshot())
	f.Add(fuzzFixtureV4(f).snapshot())
	f.Add(fairFixture(f).snapshot())
	f.Add(fuzzFixtureRestores(f).snapshot())
	f.Add(newHarness(f).snapshot())
	f.Add([]byte("RLKS\x01\x00\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) >= 4 {
			data = append([]byte{}, data...)
			binary.BigEndian.PutUint32(data[len(data)-4:], crc32.Checksum(data[:len(data)-4], crcTable))
		}
		h := fuzzFixture(t)
		before := h.digest()
		err := h.f.Restore(readCloser(data))
		if errors.Is(err, ErrOlderSnapshot) {
			// Valid, but below the fixture's applied index: refused, nothing
			// changed. A fresh state machine (applied 0) takes any index.
			if h.digest() != before || h.f.Halted() != nil {
				t.Fatalf("refused older snapshot changed the state (halted %v)", h.f.Halted())
			}
			h = newHarness(t)
			before = h.digest()
			err = h.f.Restore(readCloser(data))
		}
		if err != nil {
			if !errors.Is(err, fsmwire.ErrInvalidSnapshot) {
				t.Fatalf("error does not wrap ErrInvalidSnapshot: %v", err)
			}
			if h.digest() != before {
				t.Fatal("failed restore changed the state")
			}
			if errors.Is(err, fsmwire.ErrUnsupportedVersion) != (h.f.Halted() != nil) {
				t.Fatalf("restore error %v, halted %v", err, h.f.Halted())
			}
			return
		}
		checkInvariants(t, h.f)
		once := h.snapshot()
		f2 := New(nil)
		if err := f2.Restore(readCloser(once)); err != nil {
			t.Fatalf("re-restore: %v", err)
		}
		var twice bytes.Buffer
		_ = f2.WriteSnapshot(&twice)
		if !bytes.Equal(once, twice.Bytes()) {
			t.Fatal("snapshot not canonical after restore")
		}
	})
}

// fuzzFixtureV2 is fuzzFixture at cluster version 2, with a cluster id,
// quotas, an exactly-once table and a version-2 lock-delay.
func fuzzFixtureV2(t tb) *harness {
	h := fuzzFixture(t)
	h.entry(SetClusterVersion{Version: 2}, InitCluster{ID: "c-1"}, SetLimits{Limits: DefaultLimits().withoutFair()})
	s := h.open(time.Second, time.Second, "v2")
	h.entry(
		Acquire{Session: s, Lock: "v2", Owner: owner(20), Seq: 1, AckBelow: 1},
		Acquire{Session: s, Lock: "invoice:842", Owner: owner(21), Wait: true, Seq: 2, AckBelow: 1},
		Acquire{Session: s, Lock: "taken", Owner: owner(22), Seq: 4, AckBelow: 1},
	)
	h.do(ExpireSessions{Sessions: []lockinfo.SessionID{s}})
	b := h.open(time.Second, 0, "v2b")
	h.do(Acquire{Session: b, Lock: "q", Owner: owner(23), Seq: 3, AckBelow: 2})
	return h
}
