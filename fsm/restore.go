package fsm

import (
	"fmt"
	"io"
	"math"

	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/lockinfo"
)

// Restoring a backup into a running cluster. A backup is a snapshot
// (WriteSnapshot, of any version this binary reads). Installed as it is, it
// would set the grant counter back — tokens the cluster handed out since
// would be handed out again, and a fence that saw them would admit two
// holders with one token — and it would bring back session ids that live
// sessions of the running cluster use. PrepareRestore rewrites it first,
// against the state it is to replace:
//
//   - the grant counter becomes the higher of the two: every later grant
//     takes a token above every token either history handed out;
//   - every session of the backup gets a new id above every id the running
//     cluster handed out, and loses its exactly-once table: no client knows
//     the new ids, so these sessions are kept alive by nobody and expire
//     after their TTL (from the leader's restore, plus its takeover grace),
//     their locks passing to their waiters (or into their lock-delay) as at
//     any expiry. The sessions of the running cluster are not in the
//     restored state: their clients learn it at their next keepalive.
//   - the cluster id, the replicated quotas, the record of restores, the
//     takeover markers and the applied index are the running cluster's
//     (PrepareRestoreAt: the index it is installed at); the cluster version
//     is the higher of the two (a backup of version 1 has its lock-delays
//     converted as on an upgrade); from cluster version 4 every session
//     was renewed at that index (renewed.go).
//
// Locks, holders (with their tokens and descriptions), FIFO queues and
// lock-delays are the backup's.

// RestoreSummary describes a prepared restore.
type RestoreSummary struct {
	Sessions, Locks, Held, Waiters int
	BackupLastToken                lockinfo.Token     // the backup's grant counter
	LastToken                      lockinfo.Token     // the restored grant counter
	SessionOffset                  lockinfo.SessionID // added to every session id of the backup
	BackupIndex                    uint64             // the applied index the backup was taken at
}

// PrepareRestore reads the backup from r, rewrites it against the current
// state as described above, and writes the snapshot to install (in the
// format of the resulting cluster version) to w. The state machine is not
// changed. Errors: the backup wraps ErrInvalidSnapshot (and
// ErrUnsupportedVersion for a version this binary does not read); a halted
// state machine wraps ErrHalted.
//
// The result is only right while nothing is applied between this call and
// the installation of its output (the node runs both on the leader's
// proposer, between two entries).
func (f *FSM) PrepareRestore(r io.Reader, w io.Writer) (RestoreSummary, error) {
	return f.PrepareRestoreAt(r, w, 0)
}

// PrepareRestoreAt is PrepareRestore for a restore installed at log index
// at: the snapshot written claims at as its applied index instead of the
// current one (0: the current one). raft.Restore installs a backup at an
// index above every entry of the log; claiming it keeps the restore above
// whatever a replica applied meanwhile (Restore refuses a snapshot below
// the applied index: ErrOlderSnapshot; raft panics if a user restore
// fails). An at below the applied index is refused with ErrOlderSnapshot.
func (f *FSM) PrepareRestoreAt(r io.Reader, w io.Writer, at uint64) (RestoreSummary, error) {
	b, err := decodeSnapshot(r)
	if err != nil {
		return RestoreSummary{}, err
	}
	cur, err := f.frozen()
	if err != nil {
		return RestoreSummary{}, err
	}
	if at != 0 && at < cur.index {
		return RestoreSummary{}, fmt.Errorf("%w: restore at index %d, applied %d", ErrOlderSnapshot, at, cur.index)
	}
	sum, err := b.restoreOnto(cur, at)
	if err != nil {
		return RestoreSummary{}, err
	}
	if err := b.encode(w); err != nil {
		return RestoreSummary{}, fmt.Errorf("fsm: writing the restore snapshot: %w", err)
	}
	return sum, nil
}

// restoreOnto rewrites the decoded backup b against the running state cur
// (rebase) and sets its applied index to at (0: cur's).
func (b *state) restoreOnto(cur *state, at uint64) (RestoreSummary, error) {
	sum := RestoreSummary{BackupLastToken: lockinfo.Token(b.tokenSeq), BackupIndex: b.index}
	if err := b.rebase(cur, &sum); err != nil {
		return RestoreSummary{}, err
	}
	if at != 0 {
		b.index = at
	}
	b.renewAllAt(b.index)
	sum.Sessions, sum.Locks, sum.Held, sum.Waiters, sum.LastToken = b.sessions.len(), b.locks.len(), b.held, b.waiters, lockinfo.Token(b.tokenSeq)
	return sum, nil
}

// rebase rewrites the decoded backup b against the running state cur.
func (b *state) rebase(cur *state, sum *RestoreSummary) error {
	offset := cur.sessionSeq
	if b.sessionSeq > math.MaxInt64-offset {
		return fmt.Errorf("%w: session ids of the backup (%d) and the cluster (%d) overflow", fsmwire.ErrInvalidSnapshot, b.sessionSeq, offset)
	}
	sum.SessionOffset = lockinfo.SessionID(offset)
	moved := newSessionMap()
	moved.reserve(b.sessions.len())
	for id, s := range b.sessions.all() {
		s.id = id + lockinfo.SessionID(offset)
		s.floor, s.results = 0, nil
		moved.set(s.id, s)
	}
	b.sessions = moved
	b.sessionSeq += offset
	for _, l := range b.locks.all() {
		if l.held {
			l.holder.session += lockinfo.SessionID(offset)
		}
		if g := l.shared; g != nil { // readers, a semaphore's permits
			for i := range g.items {
				if !g.items[i].owner.IsZero() {
					g.items[i].session += lockinfo.SessionID(offset)
				}
			}
		}
		for i := range l.waiters.items {
			if !l.waiters.items[i].owner.IsZero() {
				l.waiters.items[i].session += lockinfo.SessionID(offset)
			}
		}
		if l.waiters.owners != nil {
			l.waiters.buildIndex() // its counts by session
		}
	}
	b.tokenSeq = max(b.tokenSeq, cur.tokenSeq)
	if b.version < versionExactlyOnce && cur.version >= versionExactlyOnce {
		b.version = cur.version
		b.upgradeDelays()
	}
	b.version = max(b.version, cur.version)
	b.clusterID, b.limits = cur.clusterID, cur.limits
	b.index, b.clock = cur.index, cur.clock
	// The running cluster's restores (what it installed, what it stages),
	// not the backup's: a restore never brings back a staging.
	b.restores = cur.restores
	b.markers = cur.markers // the backup's are indices of another log
	return nil
}
