package fsm

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/raftlock/raftlock/internal/fsmwire"
)

// refusalRecorder also records refused restores.
type refusalRecorder struct {
	recorder
	refused [][2]uint64
}

func (r *refusalRecorder) RestoreRefused(index, applied uint64) {
	r.refused = append(r.refused, [2]uint64{index, applied})
}

// The state machine never goes back: a snapshot older than the applied
// index is refused (ErrOlderSnapshot, not ErrInvalidSnapshot), the state
// and applied index stay, the observer is told; one at the applied index,
// or newer, is restored; a fresh state machine (startup) restores any.
func TestRestoreRefusesAnOlderSnapshot(t *testing.T) {
	h := newHarness(t)
	rec := &refusalRecorder{}
	h.f = New(rec)
	s := h.open(time.Minute, 0, "")
	h.do(Acquire{Session: s, Lock: "a", Owner: owner(1)})
	older := h.snapshot()
	olderIndex := h.index
	h.do(Acquire{Session: s, Lock: "b", Owner: owner(2)})
	same := h.snapshot()
	before := h.digest()

	err := h.f.Restore(readCloser(older))
	if !errors.Is(err, ErrOlderSnapshot) || errors.Is(err, fsmwire.ErrInvalidSnapshot) {
		t.Fatalf("restoring a snapshot of %d at applied %d: %v, want ErrOlderSnapshot", olderIndex, h.index, err)
	}
	if h.digest() != before || h.f.AppliedIndex() != h.index {
		t.Fatal("the refused restore changed the state")
	}
	if _, held := h.f.Holder("b"); !held {
		t.Fatal("the refused restore lost lock b")
	}
	if len(rec.refused) != 1 || rec.refused[0] != [2]uint64{olderIndex, h.index} || len(rec.restored) != 0 {
		t.Fatalf("observer: refused %v restored %v, want one refusal (%d, %d)", rec.refused, rec.restored, olderIndex, h.index)
	}
	if err := h.f.Halted(); err != nil {
		t.Fatalf("halted after a refusal: %v", err)
	}
	if err := h.f.Restore(readCloser(same)); err != nil {
		t.Fatalf("restoring a snapshot at the applied index: %v", err)
	}
	if h.digest() != before || len(rec.restored) != 1 {
		t.Fatalf("the snapshot at the applied index: restored %v", rec.restored)
	}
	fresh := New(nil)
	if err := fresh.Restore(readCloser(older)); err != nil || fresh.AppliedIndex() != olderIndex {
		t.Fatalf("a fresh state machine: %v, applied %d", err, fresh.AppliedIndex())
	}
	h.do(Acquire{Session: s, Lock: "c", Owner: owner(3)}) // it still applies
	if _, held := h.f.Holder("c"); !held {
		t.Fatal("no apply after the refusal")
	}
}

// A restore prepared for the index raft installs it at claims that index:
// every replica, whatever it applied since, takes it. One below the
// applied index is refused before anything is written.
func TestPrepareRestoreAtClaimsTheInstallIndex(t *testing.T) {
	old := newHarness(t)
	old.do(SetClusterVersion{Version: 2})
	old.open(time.Minute, 0, "backup")
	backup := old.snapshot()

	cur := newHarness(t)
	cur.do(SetClusterVersion{Version: 2})
	for range 5 {
		cur.open(time.Minute, 0, "live")
	}
	at := cur.index + 8
	var out bytes.Buffer
	if _, err := cur.f.PrepareRestoreAt(bytes.NewReader(backup), &out, at); err != nil {
		t.Fatal(err)
	}
	cur.open(time.Minute, 0, "applied meanwhile") // e.g. a configuration entry
	if err := cur.f.Restore(readCloser(out.Bytes())); err != nil {
		t.Fatalf("installing the restore on the replica that applied more: %v", err)
	}
	if got := cur.f.AppliedIndex(); got != at {
		t.Fatalf("applied index after the restore: %d, want %d", got, at)
	}
	out.Reset()
	if _, err := cur.f.PrepareRestoreAt(bytes.NewReader(backup), &out, at-1); !errors.Is(err, ErrOlderSnapshot) || out.Len() != 0 {
		t.Fatalf("a restore below the applied index: %v (%d bytes written)", err, out.Len())
	}
}
