package fsm

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/lockinfo"
)

// restoreID returns a restore id made of b.
func restoreID(b byte) [16]byte { return [16]byte{0: 0xfe, 15: b} }

// chunksOf splits data into commands of at most size bytes for restore id.
func chunksOf(id [16]byte, data []byte, size int) []RestoreChunk {
	var out []RestoreChunk
	for off := 0; off < len(data); off += size {
		end := min(off+size, len(data))
		out = append(out, RestoreChunk{ID: id, Offset: uint64(off), Total: uint64(len(data)), Data: data[off:end]})
	}
	return out
}

// restoreFixture is a version-4 state with a held lock and a session, and
// a backup (of fuzzFixtureV3's state) that differs from it.
func restoreFixture(t tb) (*harness, []byte) {
	backup := fuzzFixtureV3(t).snapshot()
	h := newHarness(t)
	h.do(SetClusterVersion{Version: 4})
	h.advance(time.Hour) // the running counter is above the backup's
	h.do(RaiseTokens{})
	s := h.open(time.Minute, 0, "running")
	for i := range 5 {
		h.do(Acquire{Session: s, Lock: "running", Owner: owner(byte(100 + i))})
		h.do(Release{Lock: "running", Owner: owner(byte(100 + i))})
	}
	h.do(Acquire{Session: s, Lock: "running", Owner: owner(99)})
	return h, backup
}

// fuzzFixtureRestores is a version-4 state that installed a restore and
// stages another (the restores section in use), for the fuzzers.
func fuzzFixtureRestores(t tb) *harness {
	h, backup := restoreFixture(t)
	for _, c := range chunksOf(restoreID(1), backup, len(backup)/2+1) {
		h.do(c)
	}
	h.do(RestoreCommit{ID: restoreID(1), Size: uint64(len(backup))})
	h.do(chunksOf(restoreID(2), backup, 100)[0])
	return h
}

func wantOK(t *testing.T, what string, r Result) {
	t.Helper()
	if r.Status != fsmwire.StatusOK {
		t.Fatalf("%s: %+v", what, r)
	}
}

// The staged backup is installed at the commit's index with
// PrepareRestore's semantics, read against the state at that index — not
// before: chunks change nothing visible, and a grant between the chunks
// and the commit counts.
func TestRestoreCommandInstallsAtItsIndex(t *testing.T) {
	h, backup := restoreFixture(t)
	id := restoreID(1)
	before := h.f.Stats()
	for _, c := range chunksOf(id, backup, 40) {
		wantOK(t, "chunk", h.do(c))
		if h.f.Stats().Held != before.Held || h.f.Stats().LastToken != before.LastToken {
			t.Fatal("a staged chunk changed the lock table")
		}
	}
	// Granted after the staging, before the commit: the counter the
	// restore keeps is above it.
	s := h.open(time.Minute, 0, "late")
	late := h.do(Acquire{Session: s, Lock: "late", Owner: owner(98)})

	want := New(nil)
	if err := want.Restore(readCloser(h.snapshot())); err != nil {
		t.Fatal(err)
	}
	wantSum, err := want.PrepareRestoreAt(bytes.NewReader(backup), &bytes.Buffer{}, h.index+1)
	if err != nil {
		t.Fatal(err)
	}
	r := h.do(RestoreCommit{ID: id, Size: uint64(len(backup))})
	wantOK(t, "commit", r)
	sum, index, ok := h.f.RestoreOutcome(id)
	if !ok || index != h.index || !reflect.DeepEqual(sum, wantSum) {
		t.Fatalf("outcome %+v at %d (%v), want %+v at %d", sum, index, ok, wantSum, h.index)
	}
	if sum.LastToken != late.Token || r.Token != late.Token {
		t.Fatalf("restored counter %d (result %d), want the running %d", sum.LastToken, r.Token, late.Token)
	}
	if _, ok := h.f.Session(s); ok {
		t.Fatal("a session of the running cluster survived the restore")
	}
	if _, held := h.f.Holder("late"); held {
		t.Fatal("a lock of the running cluster survived the restore")
	}
	if hd, held := h.f.Holder("invoice:842"); !held || hd.Session <= lockinfo.SessionID(before.Sessions) {
		t.Fatalf("the backup's holder: %+v (held %v)", hd, held)
	}
	if got := h.f.Stats(); got.Index != h.index || got.Sessions != sum.Sessions || got.Locks != sum.Locks {
		t.Fatalf("stats after the restore %+v, summary %+v", got, sum)
	}
	if ev := h.rec.take(); len(ev) == 0 || ev[len(ev)-1].Kind != fsmwire.EventRestored || ev[len(ev)-1].Index != h.index {
		t.Fatalf("events %+v, want EventRestored last", ev)
	}
	checkInvariants(t, h.f)

	// Taken again (a retry, a duplicate): nothing changes, the first
	// result is the answer.
	d := h.content()
	wantOK(t, "repeat", h.do(RestoreCommit{ID: id, Size: uint64(len(backup))}))
	wantOK(t, "late chunk", h.do(chunksOf(id, backup, 40)[0]))
	if h.content() != d {
		t.Fatal("a repeated commit (or a late chunk of it) changed the state")
	}
	if again, at, _ := h.f.RestoreOutcome(id); again != sum || at != index {
		t.Fatalf("repeat answered %+v at %d", again, at)
	}
}

// Every refusal changes nothing; the staging rules are the log's alone.
func TestRestoreCommandStaging(t *testing.T) {
	h, backup := restoreFixture(t)
	a, b := restoreID(1), restoreID(2)
	ca, cb := chunksOf(a, backup, 100), chunksOf(b, backup, 100)
	size := uint64(len(backup))

	refused := func(what string, c Command) {
		t.Helper()
		d := h.content()
		if r := h.do(c); r.Status != fsmwire.StatusInvalid || r.Reason == "" {
			t.Fatalf("%s: %+v, want StatusInvalid", what, r)
		}
		if h.content() != d {
			t.Fatalf("%s: a refused command changed the state", what)
		}
	}
	refused("chunk without a staging", ca[1])
	refused("commit without a staging", RestoreCommit{ID: a, Size: size})
	wantOK(t, "first", h.do(ca[0]))
	refused("gap", ca[2])
	refused("incomplete commit", RestoreCommit{ID: a, Size: size})
	d := h.content()
	wantOK(t, "duplicate first chunk", h.do(ca[0]))
	if h.content() != d {
		t.Fatal("a duplicate chunk changed the state")
	}
	bad := ca[0]
	bad.Data = append([]byte{}, bad.Data...)
	bad.Data[7] ^= 1
	refused("conflicting duplicate", bad)
	other := ca[1]
	other.Total++
	refused("another total", other)
	wantOK(t, "second", h.do(ca[1]))
	// Another restore starts: a's staging is gone.
	wantOK(t, "b's first", h.do(cb[0]))
	refused("a after b started", ca[2])
	refused("a's commit after b started", RestoreCommit{ID: a, Size: size})
	// Abort of another id leaves b; of b drops it.
	wantOK(t, "abort a", h.do(RestoreAbort{ID: a}))
	wantOK(t, "b's second", h.do(cb[1]))
	wantOK(t, "abort b", h.do(RestoreAbort{ID: b}))
	refused("b after its abort", cb[2])

	// A staging no chunk extends is dropped after restoreStagingIdle
	// entries, not before.
	wantOK(t, "b again", h.do(cb[0]))
	for i := 0; i < restoreStagingIdle-1; i++ {
		h.index++ // entries of other commands, as far as staging goes
	}
	wantOK(t, "b's second, at the last idle entry", h.do(cb[1]))
	h.index += restoreStagingIdle
	h.do(Noop{})
	refused("b after it went idle", cb[2])

	// A staged backup that does not decode is dropped, and the lock table
	// stays.
	garbage := bytes.Repeat([]byte("x"), 300)
	for _, c := range chunksOf(b, garbage, 100) {
		wantOK(t, "garbage chunk", h.do(c))
	}
	table := h.f.Stats()
	if r := h.do(RestoreCommit{ID: b, Size: 300}); r.Status != fsmwire.StatusInvalid || !bytes.Contains([]byte(r.Reason), []byte("snapshot")) {
		t.Fatalf("commit of garbage: %+v", r)
	}
	if got := h.f.Stats(); got.Sessions != table.Sessions || got.Held != table.Held || got.LastToken != table.LastToken {
		t.Fatalf("a refused commit changed the lock table: %+v, was %+v", got, table)
	}
	refused("commit of garbage again (dropped)", RestoreCommit{ID: b, Size: 300})
	checkInvariants(t, h.f)
}

// Below cluster version 4 the restore commands are refused by the state
// machine too, and the node may not propose them.
func TestRestoreCommandNeedsVersion4(t *testing.T) {
	h := fuzzFixtureV3(t)
	backup := h.snapshot()
	for _, c := range []Command{chunksOf(restoreID(1), backup, 1<<20)[0], RestoreCommit{ID: restoreID(1), Size: 9}, RestoreAbort{ID: restoreID(1)}} {
		if NeedsVersion(c) != versionRestore {
			t.Fatalf("NeedsVersion(%T) = %d", c, NeedsVersion(c))
		}
		if !c.op().LeaderOnly() {
			t.Fatalf("%s is not leader-only", c.op())
		}
		d := h.content()
		if r := h.do(c); r.Status != fsmwire.StatusInvalid {
			t.Fatalf("%T at cluster version 3: %+v", c, r)
		}
		if h.content() != d {
			t.Fatalf("%T at cluster version 3 changed the state", c)
		}
	}
}

func TestRestoreCommandValidate(t *testing.T) {
	id := restoreID(1)
	for name, c := range map[string]Command{
		"chunk without id":     RestoreChunk{Offset: 0, Total: 1, Data: []byte{1}},
		"empty chunk":          RestoreChunk{ID: id, Total: 1},
		"chunk too long":       RestoreChunk{ID: id, Total: maxRestoreChunk + 1, Data: make([]byte, maxRestoreChunk+1)},
		"backup too large":     RestoreChunk{ID: id, Total: fsmwire.MaxRestoreStaged + 1, Data: []byte{1}},
		"chunk beyond total":   RestoreChunk{ID: id, Offset: 2, Total: 2, Data: []byte{1}},
		"data longer than all": RestoreChunk{ID: id, Total: 1, Data: []byte{1, 2}},
		"offset overflow":      RestoreChunk{ID: id, Offset: 1 << 63, Total: 2, Data: []byte{1}},
		"commit without id":    RestoreCommit{Size: 1},
		"commit of nothing":    RestoreCommit{ID: id},
		"commit too large":     RestoreCommit{ID: id, Size: fsmwire.MaxRestoreStaged + 1},
		"abort without id":     RestoreAbort{},
	} {
		if err := c.validate(); !errors.Is(err, fsmwire.ErrInvalidCommand) {
			t.Errorf("%s: %v", name, err)
		}
	}
	for _, c := range []Command{
		RestoreChunk{ID: id, Offset: fsmwire.MaxRestoreStaged - maxRestoreChunk, Total: fsmwire.MaxRestoreStaged, Data: make([]byte, maxRestoreChunk)},
		RestoreCommit{ID: id, Size: fsmwire.MaxRestoreStaged},
		RestoreAbort{ID: id},
	} {
		if err := c.validate(); err != nil {
			t.Errorf("%T: %v", c, err)
		}
	}
}

// A replica that installs a snapshot taken mid-staging (or after an
// install) continues exactly as the others: same results, same state.
func TestRestoreStagingInSnapshots(t *testing.T) {
	_, backup := restoreFixture(t)
	a := restoreID(1)
	chunks := chunksOf(a, backup, 64)
	var log []Command
	for _, c := range chunks {
		log = append(log, c)
	}
	log = append(log, RestoreCommit{ID: a, Size: uint64(len(backup))}, RestoreCommit{ID: a, Size: uint64(len(backup))})
	for _, c := range chunksOf(restoreID(2), backup, 64)[:2] {
		log = append(log, c)
	}

	for cut := 0; cut <= len(log); cut++ {
		leader, _ := restoreFixture(t)
		for _, c := range log[:cut] {
			leader.do(c)
		}
		snap := leader.snapshot()
		follower := newHarness(t)
		if err := follower.f.Restore(readCloser(snap)); err != nil {
			t.Fatalf("cut %d: %v", cut, err)
		}
		follower.index, follower.now = leader.index, leader.now
		var again bytes.Buffer
		if err := follower.f.WriteSnapshot(&again); err != nil || !bytes.Equal(again.Bytes(), snap) {
			t.Fatalf("cut %d: snapshot → restore → snapshot differs (%v)", cut, err)
		}
		for i, c := range log[cut:] {
			if rl, rf := leader.do(c), follower.do(c); !reflect.DeepEqual(rl, rf) {
				t.Fatalf("cut %d, command %d (%T): leader %+v, follower %+v", cut, i, c, rl, rf)
			}
		}
		if leader.digest() != follower.digest() {
			t.Fatalf("cut %d: the replicas differ", cut)
		}
	}
}

// The install builds the new state without the state machine's lock:
// readers go on reading the state before the restore (and its index)
// meanwhile, and the swap is atomic for them.
func TestRestoreCommitBuildsOutsideTheLock(t *testing.T) {
	h, backup := restoreFixture(t)
	id := restoreID(1)
	for _, c := range chunksOf(id, backup, 1<<20) {
		h.do(c)
	}
	before := h.f.Stats()
	var during Stats
	restoreBuilding = func() {
		if !h.f.mu.TryRLock() {
			t.Error("the state machine's lock is held while the restore is built")
			return
		}
		h.f.mu.RUnlock()
		during = h.f.Stats()
	}
	defer func() { restoreBuilding = nil }()
	wantOK(t, "commit", h.do(RestoreCommit{ID: id, Size: uint64(len(backup))}))
	if during != before {
		t.Fatalf("a reader during the build saw %+v, want the state before %+v", during, before)
	}
	if after := h.f.Stats(); after.Index != h.index || after == before {
		t.Fatalf("after the commit: %+v", after)
	}
}

// A backup of a cluster version above the running cluster's is refused by
// every replica alike (one of an older binary could not read it), and
// changes nothing but dropping its staging.
func TestRestoreCommitRefusesAHigherClusterVersion(t *testing.T) {
	h := fuzzFixtureV3(t)
	backup := fuzzFixtureV4(t).snapshot()
	h.do(SetClusterVersion{Version: 3})
	// The running cluster is at 3: the commands are refused already; at 4
	// with a backup of 4 they work. Check the rule on the build itself.
	cur := h.f.st.freeze()
	b, err := decodeSnapshot(bytes.NewReader(backup))
	if err != nil || b.version != 4 || cur.version != 3 {
		t.Fatalf("fixtures: %v, versions %d and %d", err, b.version, cur.version)
	}
	a := applier{st: h.f.st, index: h.index + 1}
	h.f.st.restores.staging = &staging{id: restoreID(1), total: uint64(len(backup)), size: uint64(len(backup)), chunks: [][]byte{backup}}
	table := h.content()
	r := a.restoreCommit(RestoreCommit{ID: restoreID(1), Size: uint64(len(backup))})
	if r.Status != fsmwire.StatusInvalid || !bytes.Contains([]byte(r.Reason), []byte("cluster version 4")) {
		t.Fatalf("commit of a version-4 backup at version 3: %+v", r)
	}
	if h.f.st.restores.staging != nil {
		t.Fatal("the refused backup's staging was kept")
	}
	h.f.st.restores.staging = &staging{id: restoreID(1), total: uint64(len(backup)), size: uint64(len(backup)), chunks: [][]byte{backup}}
	if h.content() != table {
		t.Fatal("a refused commit changed the state")
	}
}
