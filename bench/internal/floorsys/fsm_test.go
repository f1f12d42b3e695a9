package floorsys

import (
	"bytes"
	"encoding/binary"
	"io"
	"slices"
	"testing"

	"github.com/hashicorp/raft"
)

// cmd is one command of a test entry.
type cmd struct {
	op   byte
	name string
	id   uint64 // a Lock's waiter id
}

// lock and unlock are test commands.
func lock(name string, id uint64) cmd { return cmd{opLock, name, id} }
func unlock(name string) cmd          { return cmd{op: opUnlock, name: name} }

// entry encodes commands as the group commit does (a Lock with its id).
func entry(t *testing.T, cmds ...cmd) *raft.Log {
	t.Helper()
	var data []byte
	for _, c := range cmds {
		var b [cmdSize]byte
		if err := encodeCommand(b[:], c.op, c.name); err != nil {
			t.Fatal(err)
		}
		binary.BigEndian.PutUint64(b[idAt:], c.id)
		data = append(data, b[:]...)
	}
	return &raft.Log{Type: raft.LogCommand, Data: data}
}

func TestHeldNamesLinesUpAndHandsOff(t *testing.T) {
	h := newHeldNames()
	steps := []struct {
		log    *raft.Log
		res    []byte
		grants []uint64
	}{
		{entry(t, lock("a", 1)), []byte{resOK}, nil},
		// Two waiters, then a Lock and an Unlock of a free name.
		{entry(t, lock("a", 2), lock("a", 3), lock("b", 4), unlock("b")), []byte{resQueued, resQueued, resOK, resOK}, nil},
		{entry(t, unlock("b")), []byte{resRefused}, nil},
		// The holder's Unlock hands "a" to 2; 2's to 3 (same entry); 3's frees it.
		{entry(t, unlock("a"), unlock("a")), []byte{resOK, resOK}, []uint64{2, 3}},
		{entry(t, unlock("a")), []byte{resOK}, nil},
		{entry(t, unlock("a")), []byte{resRefused}, nil},
		// A waiter in line in the entry that frees the name is granted in it.
		{entry(t, lock("c", 5), lock("c", 6), unlock("c")), []byte{resOK, resQueued, resOK}, []uint64{6}},
	}
	for i, st := range steps {
		out := h.Apply(st.log).(*applied)
		if !bytes.Equal(out.res, st.res) || !slices.Equal(out.grants, st.grants) {
			t.Errorf("step %d: res %v grants %v, want %v %v", i, out.res, out.grants, st.res, st.grants)
		}
	}
	if out := h.Apply(&raft.Log{Type: raft.LogCommand, Data: []byte{1, 2, 3}}).(*applied); len(out.res) != 0 {
		t.Errorf("a partial command: %v", out.res)
	}
}

// A snapshot keeps the lines: the restored machine hands off as the first.
func TestHeldNamesSnapshotKeepsLines(t *testing.T) {
	h := newHeldNames()
	h.Apply(entry(t, lock("a", 1), lock("a", 2), lock("a", 3), lock("b", 4)))
	snap, err := h.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	sink := &memSink{}
	if err := snap.Persist(sink); err != nil {
		t.Fatal(err)
	}
	r := newHeldNames()
	if err := r.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
		t.Fatal(err)
	}
	out := r.Apply(entry(t, unlock("a"), unlock("a"), unlock("b"), unlock("b"))).(*applied)
	if want := []uint64{2, 3}; !slices.Equal(out.grants, want) || !bytes.Equal(out.res, []byte{resOK, resOK, resOK, resRefused}) {
		t.Errorf("after restore: res %v grants %v, want grants %v", out.res, out.grants, want)
	}
	if err := r.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()[:sink.Len()-3]))); err == nil {
		t.Error("a truncated snapshot was restored")
	}
}

type memSink struct{ bytes.Buffer }

func (*memSink) ID() string    { return "mem" }
func (*memSink) Cancel() error { return nil }
func (*memSink) Close() error  { return nil }

// The leader holds back a batch only while every queued command is a Lock
// of a held name.
func TestOnlyLining(t *testing.T) {
	h := newHeldNames()
	h.Apply(entry(t, lock("a", 1)))
	g := newGroupCommit(nil, h, 0)
	queue := func(c cmd) {
		var w waiter
		if err := encodeCommand(w.cmd[:], c.op, c.name); err != nil {
			t.Fatal(err)
		}
		g.queue = append(g.queue, w)
	}
	if g.onlyLining() {
		t.Error("an empty queue is held back")
	}
	queue(lock("a", 0))
	if !g.onlyLining() {
		t.Error("a Lock of a held name alone is not held back")
	}
	queue(lock("b", 0))
	if g.onlyLining() {
		t.Error("held back with a Lock of a free name queued")
	}
	g.queue = g.queue[:1]
	queue(unlock("a"))
	if g.onlyLining() {
		t.Error("held back with an Unlock queued")
	}
}
