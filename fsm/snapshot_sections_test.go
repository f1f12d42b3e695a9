package fsm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/lockinfo"
)

// fuzzFixtureV4 is fuzzFixtureV3 at cluster version 4, with a takeover
// marker and a renewal (renewed.go).
func fuzzFixtureV4(t tb) *harness {
	h := fuzzFixtureV3(t)
	h.do(SetClusterVersion{Version: 4})
	h.do(Takeover{})
	h.do(Renewed{Sessions: []lockinfo.SessionID{1}})
	return h
}

// testSection is a section for the tests of the mechanism: n records, each
// a number made of the tag and the record's position, which decode checks.
func testSection(tag uint64, n int) snapshotSection {
	return snapshotSection{
		tag: tag, name: "test",
		records: func(st *state) int { return n },
		encode: func(st *state, i int, rec []byte) []byte {
			return binary.AppendUvarint(rec, uint64(i)+100*tag)
		},
		decode: func(st *state, i, n int, d *decoder) {
			if got := d.Uvarint(); got != uint64(i)+100*tag {
				d.Fail("record %d of section %d holds %d", i, tag, got)
			}
		},
	}
}

func withSections(t *testing.T, secs ...snapshotSection) {
	t.Helper()
	saved := snapshotSections
	snapshotSections = secs
	t.Cleanup(func() { snapshotSections = saved })
}

// A version-4 snapshot round-trips byte for byte with and without sections,
// and each section's records are read back by its decoder.
func TestVersion4SnapshotSections(t *testing.T) {
	for name, secs := range map[string][]snapshotSection{
		"none":              nil,
		"empty section":     {testSection(1, 0)},
		"one":               {testSection(1, 1)},
		"two, many records": {testSection(1, 3), testSection(7, 2)},
	} {
		t.Run(name, func(t *testing.T) {
			withSections(t, secs...)
			h := fuzzFixtureV4(t)
			snap := h.snapshot()
			if snap[4] != snapshotV4 {
				t.Fatalf("snapshot version %d", snap[4])
			}
			f := New(nil)
			if err := f.Restore(readCloser(snap)); err != nil {
				t.Fatal(err)
			}
			var again bytes.Buffer
			if err := f.WriteSnapshot(&again); err != nil || !bytes.Equal(again.Bytes(), snap) {
				t.Fatalf("snapshot → restore → snapshot differs (%v)", err)
			}
			if f.Stats() != h.f.Stats() {
				t.Fatalf("stats %+v vs %+v", f.Stats(), h.f.Stats())
			}
		})
	}
}

// A reader refuses a section it does not know (a newer format: the state
// machine halts on it), sections out of order, and records its decoder
// refuses or does not read to the end.
func TestVersion4SnapshotRefusesBadSections(t *testing.T) {
	write := func(secs ...snapshotSection) []byte {
		withSections(t, secs...)
		return fuzzFixtureV4(t).snapshot()
	}
	unknown := write(testSection(1, 1), testSection(9, 1))
	outOfOrder := write(testSection(9, 1), testSection(1, 1))
	readsNothing := snapshotSection{tag: 1, name: "reads nothing", records: func(*state) int { return 1 },
		encode: func(st *state, i int, rec []byte) []byte { return rec }, decode: func(*state, int, int, *decoder) {}}
	refuses := testSection(2, 1)
	refuses.decode = func(st *state, i, n int, d *decoder) { d.Fail("refused") }
	for name, c := range map[string]struct {
		snap    []byte
		known   []snapshotSection
		unknown bool
	}{
		"unknown tag":    {unknown, []snapshotSection{testSection(1, 1)}, true},
		"too many":       {unknown, []snapshotSection{testSection(9, 1)}, true},
		"out of order":   {outOfOrder, []snapshotSection{testSection(1, 1), testSection(9, 1)}, false},
		"bad record":     {write(testSection(2, 1)), []snapshotSection{refuses}, false},
		"trailing bytes": {write(testSection(1, 1)), []snapshotSection{readsNothing}, false},
	} {
		t.Run(name, func(t *testing.T) {
			withSections(t, c.known...)
			err := New(nil).Restore(readCloser(c.snap))
			if !errors.Is(err, fsmwire.ErrInvalidSnapshot) || errors.Is(err, fsmwire.ErrUnsupportedVersion) != c.unknown {
				t.Fatalf("restored: %v", err)
			}
			t.Log(err)
		})
	}
}
