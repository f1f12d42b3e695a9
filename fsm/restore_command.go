package fsm

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"slices"

	"github.com/raftlock/raftlock/internal/fsmwire"
)

// Restore as a replicated command (cluster version 4). A backup replaces
// the lock table at one index of the log, on every replica, when that
// entry is applied — never before it commits, never on one replica alone.
// A backup is larger than one log entry should be (a million locks take
// about 62 MiB), so it travels in pieces:
//
//   - RestoreChunk entries stage the backup's bytes, in order, under the
//     restore's id. The staging is replicated state like any other (and is
//     in snapshots: a replica that installs one mid-staging has the bytes
//     staged so far); nothing of it is visible in the lock table.
//   - A RestoreCommit entry installs what was staged: the state machine
//     rewrites the backup against the state at the commit's index as
//     PrepareRestore does (the token counter becomes the higher of the
//     two, every running session ends, the backup's sessions come back
//     under new ids) and replaces the lock table with it. The commit's id
//     is remembered with its RestoreSummary: a commit of the same id
//     again (a retry whose first answer was lost, a duplicate delivery)
//     changes nothing and is answered with the first result.
//   - A RestoreAbort entry drops a staging whose restore gave up.
//
// One staging exists at a time, holding at most MaxRestoreStaged bytes:
// the first chunk of another restore replaces it (the later restore wins;
// the earlier one's next chunk or commit is refused), and a staging that no
// chunk extended for restoreStagingIdle entries is dropped. Both rules
// depend on the log alone, so every replica drops the same staging at the
// same index.
//
// Installing a large backup takes a while (decoding a million locks takes
// about a second): the state machine builds the new state outside its
// lock — it is the only writer — and takes the lock only to swap it in,
// so that reads of the replica are served (from the state before the
// restore) meanwhile.

// RestoreChunk stages Data, the bytes of a backup at Offset, for the
// restore named ID (a random id per restore call). Total is the backup's
// whole size. The chunk at Offset 0 starts a staging (replacing any other
// restore's); every other chunk must continue the staging of ID at its
// staged size. A chunk already staged (the same bytes at the same offset:
// a retry) changes nothing. Result: StatusOK with Count = the bytes staged
// so far (also when ID is already installed: nothing changes);
// StatusInvalid (Reason says why) when ID has no staging (it was replaced
// by another restore's, dropped as idle or aborted) or the chunk does not
// fit it.
//
// Proposed by the leader only (a node's Restore): never from a client.
type RestoreChunk struct {
	ID     [16]byte
	Offset uint64
	Total  uint64
	Data   []byte
}

// RestoreCommit installs the backup staged under ID, of Size bytes, at
// its own index (see above). Result: StatusOK with Token = the restored
// token counter, also for a repeat of an installed ID (nothing changes:
// RestoreOutcome gives the first install's summary); StatusInvalid when
// nothing complete is staged under ID, or when the staged bytes are not a
// backup this binary reads or are of a cluster version above the
// cluster's (the staging is dropped; the lock table does not change).
type RestoreCommit struct {
	ID   [16]byte
	Size uint64
}

// RestoreAbort drops the staging of ID, if it is the one staged. Result:
// StatusOK.
type RestoreAbort struct {
	ID [16]byte
}

// Limits of restores.
const (
	// maxRestoreChunk bounds one RestoreChunk's data (the node sends
	// smaller ones: each is one log entry, and raft sends up to
	// MaxAppendEntries entries in one message to a follower catching up).
	maxRestoreChunk = 4 << 20
	// restoreHistory is how many installed restores the state machine
	// remembers (id, index, summary) to answer repeats.
	restoreHistory = 32
	// restoreStagingIdle is how many log entries a staging may go without
	// a chunk before it is dropped.
	restoreStagingIdle = 1 << 16
)

// versionRestore is the cluster version from which the restore commands
// (entry version 4) may be written and applied.
const versionRestore uint64 = 4

// op implements Command.
func (RestoreChunk) op() fsmwire.Op { return fsmwire.OpRestoreChunk }

// op implements Command.
func (RestoreCommit) op() fsmwire.Op { return fsmwire.OpRestoreCommit }

// op implements Command.
func (RestoreAbort) op() fsmwire.Op { return fsmwire.OpRestoreAbort }

// validate implements Command.
func (c RestoreChunk) validate() error {
	switch {
	case c.ID == [16]byte{}:
		return fmt.Errorf("%w: restore chunk without an id", fsmwire.ErrInvalidCommand)
	case len(c.Data) == 0 || len(c.Data) > maxRestoreChunk:
		return fmt.Errorf("%w: restore chunk of %d bytes (want 1..%d)", fsmwire.ErrInvalidCommand, len(c.Data), maxRestoreChunk)
	case c.Total == 0 || c.Total > fsmwire.MaxRestoreStaged:
		return fmt.Errorf("%w: a backup of %d bytes (want 1..%d)", fsmwire.ErrInvalidCommand, c.Total, fsmwire.MaxRestoreStaged)
	case uint64(len(c.Data)) > c.Total || c.Offset > c.Total-uint64(len(c.Data)):
		return fmt.Errorf("%w: restore chunk at %d of %d bytes beyond the backup's %d", fsmwire.ErrInvalidCommand, c.Offset, len(c.Data), c.Total)
	}
	return nil
}

// validate implements Command.
func (c RestoreCommit) validate() error {
	switch {
	case c.ID == [16]byte{}:
		return fmt.Errorf("%w: restore commit without an id", fsmwire.ErrInvalidCommand)
	case c.Size == 0 || c.Size > fsmwire.MaxRestoreStaged:
		return fmt.Errorf("%w: a backup of %d bytes (want 1..%d)", fsmwire.ErrInvalidCommand, c.Size, fsmwire.MaxRestoreStaged)
	}
	return nil
}

// validate implements Command.
func (c RestoreAbort) validate() error {
	if c.ID == [16]byte{} {
		return fmt.Errorf("%w: restore abort without an id", fsmwire.ErrInvalidCommand)
	}
	return nil
}

// Bodies (entry version 4):
//
//	RestoreChunk   ID [16]byte, Offset uvarint, Total uvarint, Data bytes
//	RestoreCommit  ID [16]byte, Size uvarint
//	RestoreAbort   ID [16]byte
//
// bytes = uvarint length + bytes.
// version implements Command.
func (RestoreChunk) version() byte { return fsmwire.EntryV4 }

// version implements Command.
func (RestoreCommit) version() byte { return fsmwire.EntryV4 }

// version implements Command.
func (RestoreAbort) version() byte { return fsmwire.EntryV4 }

// appendTo implements Command.
func (c RestoreChunk) appendTo(dst []byte, _ byte) ([]byte, error) { return appendRestore(dst, c) }

// appendTo implements Command.
func (c RestoreCommit) appendTo(dst []byte, _ byte) ([]byte, error) { return appendRestore(dst, c) }

// appendTo implements Command.
func (c RestoreAbort) appendTo(dst []byte, _ byte) ([]byte, error) { return appendRestore(dst, c) }

// exec implements Command.
func (c RestoreChunk) exec(a *applier) Result { return a.restoreChunk(c) }

// exec implements Command.
func (c RestoreCommit) exec(a *applier) Result { return a.restoreCommit(c) }

// exec implements Command.
func (c RestoreAbort) exec(a *applier) Result { return a.restoreAbort(c) }

// appendRestore appends a restore command's type byte and body.
func appendRestore(dst []byte, c Command) ([]byte, error) {
	dst = append(dst, byte(c.op()))
	switch c := c.(type) {
	case RestoreChunk:
		if len(c.Data) > maxRestoreChunk {
			return dst, fmt.Errorf("%w: restore chunk too long", fsmwire.ErrInvalidEntry)
		}
		dst = append(dst, c.ID[:]...)
		dst = binary.AppendUvarint(dst, c.Offset)
		dst = binary.AppendUvarint(dst, c.Total)
		dst = binary.AppendUvarint(dst, uint64(len(c.Data)))
		return append(dst, c.Data...), nil
	case RestoreCommit:
		dst = append(dst, c.ID[:]...)
		return binary.AppendUvarint(dst, c.Size), nil
	case RestoreAbort:
		return append(dst, c.ID[:]...), nil
	}
	return dst, fmt.Errorf("%w: not a restore command: %T", fsmwire.ErrInvalidEntry, c)
}

// restoreBody decodes the body of a restore command of type op.
func decodeRestore(d *decoder, op fsmwire.Op) Command {
	id := [16]byte(d.owner())
	switch op {
	case fsmwire.OpRestoreChunk:
		c := RestoreChunk{ID: id, Offset: d.Uvarint(), Total: d.Uvarint()}
		c.Data = d.Bytes(maxRestoreChunk)
		return c
	case fsmwire.OpRestoreCommit:
		return RestoreCommit{ID: id, Size: d.Uvarint()}
	}
	return RestoreAbort{ID: id}
}

// restores is the replicated state of restores. It is copied with the
// state by freeze: staging and installed are never changed in place (a
// change makes a new staging, a new slice).
type restores struct {
	staging   *staging           // nil: nothing staged
	installed []installedRestore // the last restoreHistory installs, oldest first
}

// staging is a backup being staged by RestoreChunk entries.
type staging struct {
	id     [16]byte
	total  uint64   // the backup's size
	size   uint64   // bytes staged so far
	last   uint64   // index of the entry that last added a chunk
	chunks [][]byte // the chunks in order; never changed once staged
}

// installedRestore is a restore that was installed.
type installedRestore struct {
	id    [16]byte
	index uint64
	sum   RestoreSummary
}

// installedAs returns the install of id, if it is remembered.
func (r *restores) installedAs(id [16]byte) (installedRestore, bool) {
	for _, in := range r.installed {
		if in.id == id {
			return in, true
		}
	}
	return installedRestore{}, false
}

// dropIdle drops a staging that no chunk extended for restoreStagingIdle
// entries (called for every command entry, before its commands).
func (r *restores) dropIdle(index uint64) {
	if s := r.staging; s != nil && index > s.last+restoreStagingIdle {
		r.staging = nil
	}
}

// stagedEqual reports whether the staged bytes at [off, off+len(b)) are b.
func (s *staging) stagedEqual(off uint64, b []byte) bool {
	var pos uint64
	for _, c := range s.chunks {
		end := pos + uint64(len(c))
		if len(b) > 0 && off < end {
			from := off - pos
			n := min(uint64(len(b)), uint64(len(c))-from)
			if !bytes.Equal(c[from:from+n], b[:n]) {
				return false
			}
			b, off = b[n:], off+n
		}
		pos = end
	}
	return len(b) == 0
}

// reader returns the staged bytes as one stream.
func (s *staging) reader() io.Reader {
	rs := make([]io.Reader, len(s.chunks))
	for i, c := range s.chunks {
		rs[i] = bytes.NewReader(c)
	}
	return io.MultiReader(rs...)
}

func (a *applier) restoreChunk(c RestoreChunk) Result {
	r := &a.st.restores
	if _, ok := r.installedAs(c.ID); ok {
		return Result{Status: fsmwire.StatusOK, Count: int(c.Total)}
	}
	s := r.staging
	if c.Offset == 0 && (s == nil || s.id != c.ID) {
		// A new staging; another restore's (if any) is dropped.
		r.staging = &staging{id: c.ID, total: c.Total, size: uint64(len(c.Data)), last: a.index, chunks: [][]byte{c.Data}}
		return Result{Status: fsmwire.StatusOK, Count: len(c.Data)}
	}
	switch {
	case s == nil || s.id != c.ID:
		return Result{Status: fsmwire.StatusInvalid, Reason: fmt.Sprintf("restore %x: nothing staged (replaced by another restore, aborted or dropped as idle)", c.ID)}
	case c.Total != s.total:
		return Result{Status: fsmwire.StatusInvalid, Reason: fmt.Sprintf("restore %x: chunk for a backup of %d bytes, staging %d", c.ID, c.Total, s.total)}
	case c.Offset+uint64(len(c.Data)) <= s.size:
		if !s.stagedEqual(c.Offset, c.Data) {
			return Result{Status: fsmwire.StatusInvalid, Reason: fmt.Sprintf("restore %x: chunk at %d differs from the bytes staged there", c.ID, c.Offset)}
		}
		return Result{Status: fsmwire.StatusOK, Count: int(s.size)} // staged already
	case c.Offset != s.size:
		return Result{Status: fsmwire.StatusInvalid, Reason: fmt.Sprintf("restore %x: chunk at %d, %d bytes staged", c.ID, c.Offset, s.size)}
	}
	n := *s
	n.chunks = append(slices.Clip(s.chunks), c.Data)
	n.size += uint64(len(c.Data))
	n.last = a.index
	r.staging = &n
	return Result{Status: fsmwire.StatusOK, Count: int(n.size)}
}

func (a *applier) restoreAbort(c RestoreAbort) Result {
	if s := a.st.restores.staging; s != nil && s.id == c.ID {
		a.st.restores.staging = nil
	}
	return Result{Status: fsmwire.StatusOK}
}

func (a *applier) restoreCommit(c RestoreCommit) Result {
	r := &a.st.restores
	if in, ok := r.installedAs(c.ID); ok {
		return Result{Status: fsmwire.StatusOK, Token: in.sum.LastToken}
	}
	s := r.staging
	switch {
	case s == nil || s.id != c.ID:
		return Result{Status: fsmwire.StatusInvalid, Reason: fmt.Sprintf("restore %x: nothing staged (replaced by another restore, aborted or dropped as idle)", c.ID)}
	case s.size != c.Size || s.size != s.total:
		return Result{Status: fsmwire.StatusInvalid, Reason: fmt.Sprintf("restore %x: %d of %d bytes staged, commit of %d", c.ID, s.size, s.total, c.Size)}
	}
	// Build the new state from a frozen copy of the running one, outside
	// the lock: nothing else writes the state meanwhile, and readers go on
	// reading the running state.
	cur := a.st.freeze()
	var (
		b   *state
		sum RestoreSummary
		err error
	)
	a.unlocked(func() {
		if restoreBuilding != nil {
			restoreBuilding()
		}
		if b, err = decodeSnapshot(s.reader()); err != nil {
			return
		}
		if b.version > cur.version {
			// A replica of an older binary cannot read it (it refuses it
			// as unsupported): every replica refuses it alike.
			err = fmt.Errorf("%w: a backup of cluster version %d, the cluster is at %d", fsmwire.ErrInvalidSnapshot, b.version, cur.version)
			return
		}
		sum, err = b.restoreOnto(cur, a.index)
	})
	if err != nil {
		r.staging = nil
		return Result{Status: fsmwire.StatusInvalid, Reason: fmt.Sprintf("restore %x: the staged backup: %v", c.ID, err)}
	}
	in := installedRestore{id: c.ID, index: a.index, sum: sum}
	keep := cur.restores.installed[max(0, len(cur.restores.installed)-(restoreHistory-1)):]
	b.restores = restores{installed: append(slices.Clip(keep), in)}
	*a.st = *b
	a.emit(Event{Kind: fsmwire.EventRestored, Token: sum.LastToken})
	return Result{Status: fsmwire.StatusOK, Token: sum.LastToken}
}

// restoreBuilding, when set (tests), runs where a restore's state is
// built, without the lock.
var restoreBuilding func()

// unlocked runs fn without the state machine's lock (the apply goroutine
// is the only writer; readers see the state as before). Without an FSM
// (tests of the applier alone) it just runs fn.
func (a *applier) unlocked(fn func()) {
	if a.f == nil {
		fn()
		return
	}
	a.f.mu.Unlock()
	defer a.f.mu.Lock()
	fn()
}

// RestoreOutcome returns the summary and the log index of the install of
// the restore named id, if the state machine remembers it (the last
// restoreHistory installs).
func (f *FSM) RestoreOutcome(id [16]byte) (RestoreSummary, uint64, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	in, ok := f.st.restores.installedAs(id)
	return in.sum, in.index, ok
}
