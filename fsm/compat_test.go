package fsm

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"testing"
)

// The files in testdata/v1 were written by the previous release (commit
// 46baeb2's state machine, at 1f02626): a log of 1,500 version-1 entries —
// lock-delays, ticks, a leader clock an hour ahead and back — with the
// snapshot after it and a digest of its events, and the snapshot of
// fuzzFixture.

// Existing data dirs replay their version-1 entries exactly as the previous
// release applied them: same events, same state, same snapshot bytes.
func TestVersion1LogReplaysAsBefore(t *testing.T) {
	raw, err := os.ReadFile("testdata/v1/v1-log.bin")
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t)
	for len(raw) > 0 {
		n, k := binary.Uvarint(raw)
		entry := raw[k : k+int(n)]
		raw = raw[k+int(n):]
		h.index++
		if resp := h.f.applyEntry(h.index, entry); resp.Err != nil {
			t.Fatalf("entry %d: %v", h.index, resp.Err)
		}
	}
	if h.index != 1500 {
		t.Fatalf("%d entries", h.index)
	}
	sum := sha256.New()
	for _, e := range h.rec.events {
		fmt.Fprintf(sum, "%d %d %d %d %q %x %d %d %d %v\n", e.Kind, e.Index, e.At, e.Session, e.Lock, e.Owner, e.Token, e.Reason, e.DelayUntil, e.FromQueue)
	}
	want, _ := os.ReadFile("testdata/v1/v1-log.events.sha256")
	if got := hex.EncodeToString(sum.Sum(nil)); got != strings.TrimSpace(string(want)) {
		t.Fatalf("events differ from the previous release's (%d events)", len(h.rec.events))
	}
	snap, _ := os.ReadFile("testdata/v1/v1-log.snap")
	if !bytes.Equal(h.snapshot(), snap) {
		t.Fatal("the snapshot after the replay differs from the previous release's")
	}
	if h.f.ClusterVersion() != 1 {
		t.Fatalf("cluster version %d", h.f.ClusterVersion())
	}
}

// At cluster version 1 the snapshot is written in the previous release's
// format, byte for byte (a replica of it can install it), and its
// snapshots restore.
func TestVersion1SnapshotsAreReadAndWritten(t *testing.T) {
	old, err := os.ReadFile("testdata/v1/v1-fixture.snap")
	if err != nil {
		t.Fatal(err)
	}
	if got := fuzzFixture(t).snapshot(); !bytes.Equal(got, old) {
		t.Fatalf("version-1 state snapshots differently:\n%x\n%x", got, old)
	}
	f := New(nil)
	if err := f.Restore(readCloser(old)); err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, f)
	var again bytes.Buffer
	if err := f.WriteSnapshot(&again); err != nil || !bytes.Equal(again.Bytes(), old) {
		t.Fatalf("restored and written again: %v", err)
	}
}
