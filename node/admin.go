package node

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/hashicorp/raft"

	"github.com/raftlock/raftlock/fsm"
)

// Admin operations (for an operator, through an admin API such as package
// admin): revoke a grant, end a session, take and restore a backup, remove
// a dead peer, transfer leadership (admin_members.go). Every one can be
// called on any replica: what must run on the leader is forwarded to it
// (admin_rpc.go). None of them is for applications' normal work.

// Errors of the admin operations.
var (
	// ErrNotHeld: Revoke found no grant with that token holding the lock
	// (released, expired or revoked already). Nothing changed.
	ErrNotHeld = errors.New("node: the lock is not held by that grant")
	// ErrNoSuchSession: EndSession found no such session. Nothing changed.
	ErrNoSuchSession = errors.New("node: no such session")
	// ErrRefused: the leader refused an admin operation (RemovePeer of a
	// peer that answers, a restore larger than a forward can carry, ...);
	// the error says why. Nothing changed.
	ErrRefused = errors.New("node: admin operation refused")
)

// Revocation says which grant Revoke ended.
type Revocation struct {
	Lock   string
	Holder fsm.Holder // the revoked grant (its token, session and description)
	Index  uint64     // log index of the Revoke
}

// Revoke force-releases lock: the grant with token ends — its lease ends on
// its replica, the lock goes to the next waiters (or, for an exclusive
// grant, into the holder session's lock-delay first), and the next grant's
// higher token fences the revoked holder out at every resource fence. The
// grant may be the exclusive holder, or from cluster version 4 a reader of
// the lock or a holder of a semaphore's permits (it ends at once: only an
// exclusive grant has a lock-delay). Token 0 names the lock's one grant,
// read after a Sync: its exclusive holder, or its only shared grant — a
// lock that several readers or permit holders share needs the token of
// the one to revoke. by and why (at most 256 bytes each) are written into
// the log entry and logged (WARN). Needs cluster version 3. Errors:
// ErrNotHeld (no such grant), ErrInvalidArgument (bad arguments, cluster
// version below 3, a shared grant below version 4, token 0 on a lock of
// several grants), ErrNoQuorum. Safe for concurrent use.
func (n *Node) Revoke(ctx context.Context, lock string, token fsm.Token, by, why string) (Revocation, error) {
	if err := checkCtx(ctx); err != nil {
		return Revocation{}, err
	}
	if err := fsm.ValidateLockName(lock); err != nil {
		return Revocation{}, fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	if err := n.Sync(ctx); err != nil {
		return Revocation{}, err
	}
	h, err := n.grantToRevoke(lock, token)
	if err != nil {
		return Revocation{}, err
	}
	token = h.Token
	res, index, err := n.Propose(ctx, fsm.Revoke{Lock: lock, Token: token, By: by, Why: why})
	if err != nil {
		return Revocation{}, err
	}
	switch res.Status {
	case fsm.StatusOK:
	case fsm.StatusNotHolder:
		return Revocation{}, fmt.Errorf("%w: lock %q, token %d (released meanwhile)", ErrNotHeld, lock, token)
	default:
		return Revocation{}, fmt.Errorf("%w: %w", ErrInvalidArgument, res.Err())
	}
	n.log.Warn("lock revoked by an operator", "lock", lock, "token", token, "holder_session", h.Session,
		"holder", h.Description, "shared", h.Shared, "permits", h.Permits, "by", by, "why", why, "index", index)
	return Revocation{Lock: lock, Holder: h, Index: index}, nil
}

// versionRevokeShared is the cluster version from which Revoke takes a
// shared grant (fsm's revoke.go).
const versionRevokeShared = 4

// grantToRevoke finds, in the local state, the grant of lock that Revoke
// names (see Revoke for token 0).
func (n *Node) grantToRevoke(lock string, token fsm.Token) (fsm.Holder, error) {
	li, _ := n.fsm.Lock(lock)
	if li.Held && (token == 0 || li.Holder.Token == token) {
		return li.Holder, nil
	}
	var h fsm.Holder
	switch {
	case token == 0 && len(li.Shared) == 1:
		h = li.Shared[0]
	case token == 0 && len(li.Shared) > 1:
		return fsm.Holder{}, fmt.Errorf("%w: lock %q has %d shared grants (tokens %s): name the one to revoke by its token",
			ErrInvalidArgument, lock, len(li.Shared), tokenList(li.Shared, 8))
	case token == 0:
		return fsm.Holder{}, fmt.Errorf("%w: lock %q is not held", ErrNotHeld, lock)
	default:
		i := slices.IndexFunc(li.Shared, func(g fsm.Holder) bool { return g.Token == token })
		if i < 0 {
			return fsm.Holder{}, fmt.Errorf("%w: lock %q, token %d", ErrNotHeld, lock, token)
		}
		h = li.Shared[i]
	}
	if v := n.fsm.ClusterVersion(); v < versionRevokeShared {
		return fsm.Holder{}, fmt.Errorf("%w: revoking a shared grant (token %d of %q) needs cluster version %d (the cluster is at %d)",
			ErrInvalidArgument, h.Token, lock, versionRevokeShared, v)
	}
	return h, nil
}

// tokenList lists the tokens of up to max grants ("3, 5, 9, … (12 in all)").
func tokenList(gs []fsm.Holder, max int) string {
	var b strings.Builder
	for i, g := range gs {
		if i == max {
			fmt.Fprintf(&b, ", … (%d in all)", len(gs))
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprint(&b, uint64(g.Token))
	}
	return b.String()
}

// EndSession ends a session as if its owner had closed it: it releases
// every lock the session holds (to their next waiters, without lock-delay —
// an operator's decision, unlike a lapse, see fsm's lapse.go) and drops
// its waits; its client learns at its next keepalive (its leases
// end then). by and why are logged (WARN). Errors: ErrNoSuchSession,
// ErrNoQuorum. Safe for concurrent use.
func (n *Node) EndSession(ctx context.Context, id fsm.SessionID, by, why string) error {
	if err := checkCtx(ctx); err != nil {
		return err
	}
	if id == 0 {
		return fmt.Errorf("%w: session id 0", ErrInvalidArgument)
	}
	info, _ := n.fsm.Session(id)
	res, index, err := n.Propose(ctx, fsm.CloseSession{Session: id})
	if err != nil {
		return err
	}
	if res.Status == fsm.StatusNoSession {
		return fmt.Errorf("%w: %d", ErrNoSuchSession, id)
	}
	if err := res.Err(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	n.log.Warn("session ended by an operator", "session", id, "owner", info.Description, "by", by, "why", why, "index", index)
	return nil
}

// BackupInfo describes a backup written by Backup.
type BackupInfo struct {
	Index     uint64 // the applied index it covers
	LastToken fsm.Token
	Sessions  int
	Locks     int
	Bytes     int64
}

// Backup writes the lock table — sessions, locks, holders, queues,
// lock-delays, the token counter — to w, in the snapshot format, as of a
// linearizable read (Sync first: it covers every command committed before
// the call). Any replica can take it. Restore installs it.
func (n *Node) Backup(ctx context.Context, w io.Writer) (BackupInfo, error) {
	if err := checkCtx(ctx); err != nil {
		return BackupInfo{}, err
	}
	if err := n.Sync(ctx); err != nil {
		return BackupInfo{}, err
	}
	var buf bytes.Buffer
	if err := n.fsm.WriteSnapshot(&buf); err != nil {
		return BackupInfo{}, fmt.Errorf("node: backup: %w", err)
	}
	st := n.fsm.Stats()
	info := BackupInfo{Index: st.Index, LastToken: st.LastToken, Sessions: st.Sessions, Locks: st.Locks, Bytes: int64(buf.Len())}
	if _, err := buf.WriteTo(w); err != nil {
		return info, fmt.Errorf("node: backup: %w", err)
	}
	return info, nil
}

// MaxRestoreBytes bounds a backup given to Restore. (A backup restored
// through a follower also has to fit in one forwarded request: about
// 16 MiB; larger ones are restored on the leader.)
const MaxRestoreBytes = 1 << 30

// Restore replaces the replicated lock table with a backup (Backup's
// output), on every replica, at one point of the log. What that means for
// a running cluster (see fsm.PrepareRestore):
//
//   - the token counter becomes the higher of the backup's and the
//     cluster's, so every later grant fences out every token either
//     history handed out;
//   - every session of the running cluster ends (its clients find out at
//     their next keepalive; their leases end); the backup's sessions come
//     back under new ids, orphaned, holding and waiting as in the backup,
//     and expire after their TTL plus the leader's takeover grace — their
//     locks then pass to their waiters (or into lock-delay) as at any
//     expiry, so nobody is granted a restored lock for at least a TTL;
//   - the cluster id, the quotas and the Raft configuration stay.
//
// It runs on the leader's proposer between two log entries (nothing is
// applied between reading the running state and installing the backup);
// from a follower the backup is forwarded to the leader. Errors:
// fsm.ErrInvalidSnapshot (a bad backup; nothing changed), ErrRefused (too
// large to forward), ErrNoQuorum.
func (n *Node) Restore(ctx context.Context, r io.Reader) (fsm.RestoreSummary, error) {
	if err := checkCtx(ctx); err != nil {
		return fsm.RestoreSummary{}, err
	}
	data, err := io.ReadAll(io.LimitReader(r, MaxRestoreBytes+1))
	if err != nil {
		return fsm.RestoreSummary{}, fmt.Errorf("node: restore: reading the backup: %w", err)
	}
	if len(data) > MaxRestoreBytes {
		return fsm.RestoreSummary{}, fmt.Errorf("%w: restore: backup over %d bytes", ErrInvalidArgument, MaxRestoreBytes)
	}
	// Check it here first: a bad backup fails without a round trip.
	if _, err := fsm.New(nil).PrepareRestore(bytes.NewReader(data), io.Discard); err != nil {
		return fsm.RestoreSummary{}, fmt.Errorf("node: restore: %w", err)
	}
	var sum fsm.RestoreSummary
	err = n.retry(ctx, false, func(ctx context.Context) error {
		if n.raft.State() == raft.Leader {
			return n.proposeAsLeader(ctx, restoreCmd{data: data, sum: &sum}).err
		}
		var err error
		sum, err = n.forwardRestore(ctx, data)
		return err
	})
	if err != nil {
		return fsm.RestoreSummary{}, err
	}
	n.log.Warn("lock table restored from a backup", "sessions", sum.Sessions, "locks", sum.Locks,
		"held", sum.Held, "last_token", sum.LastToken, "backup_last_token", sum.BackupLastToken, "backup_index", sum.BackupIndex)
	return sum, nil
}

// restoreCmd is a restore travelling through the leader's proposer like a
// command (it is never encoded: takeRestores runs it).
type restoreCmd struct {
	data []byte
	sum  *fsm.RestoreSummary // set by takeRestores before the proposal finishes
}

func (restoreCmd) Op() fsm.Op      { return 0 }
func (restoreCmd) Validate() error { return nil }

// takeRestores runs the restores of a batch, before its commands, and
// returns the other proposals. It runs on the proposer between two
// entries: the previous entry has been applied here and no other is in
// flight, so the running state that fsm.PrepareRestore reads is the one
// the restore replaces.
func (n *Node) takeRestores(batch []*proposal) []*proposal {
	rest := batch[:0:0]
	for _, p := range batch {
		rc, ok := p.cmd.(restoreCmd)
		if !ok {
			rest = append(rest, p)
			continue
		}
		sum, index, err := n.installRestore(rc.data)
		*rc.sum = sum
		p.finish(outcome{index: index, err: err})
	}
	return rest
}

// restoreIndexGap is how far above the log's last index a restore is
// installed. raft accepts one configuration change at a time and refuses a
// restore while one is uncommitted, so at most a few can commit between
// reading the last index and the restore.
const restoreIndexGap = 8

// installRestore prepares the backup against the applied state and has
// raft install it; then it commits a Noop, so that every replica's applied
// index passes the restore's.
func (n *Node) installRestore(data []byte) (fsm.RestoreSummary, uint64, error) {
	var snap bytes.Buffer
	// The restore claims the index raft installs it at (above every entry):
	// every replica's FSM then takes it (it refuses a snapshot below its
	// applied index, and raft panics if a user restore fails), and its
	// applied index covers the hole raft leaves. restoreIndexGap leaves
	// room for configuration changes committed (not through the proposer)
	// before raft takes the restore.
	at := max(n.fsm.AppliedIndex(), n.raft.LastIndex()) + restoreIndexGap
	sum, err := n.fsm.PrepareRestoreAt(bytes.NewReader(data), &snap, at)
	if err != nil {
		return sum, 0, fmt.Errorf("%w: restore: %w", ErrInvalidArgument, err)
	}
	// raft panics if the FSM refuses a user snapshot: make sure it cannot.
	if err := fsm.New(nil).Restore(io.NopCloser(bytes.NewReader(snap.Bytes()))); err != nil {
		return sum, 0, fmt.Errorf("node: restore: the prepared snapshot does not install: %w", err)
	}
	meta := &raft.SnapshotMeta{Version: raft.SnapshotVersionMax, Index: at - 1, Size: int64(snap.Len())} // raft installs it at at
	if err := n.raft.Restore(meta, &snap, n.cfg.AttemptTimeout); err != nil {
		return sum, 0, raftErr(err)
	}
	data, err = fsm.EncodeEntry(fsm.Entry{At: n.wallNow().UnixNano(), Commands: []fsm.Command{fsm.Noop{}}})
	if err != nil {
		return sum, 0, err
	}
	f := n.raft.Apply(data, n.cfg.AttemptTimeout)
	if err := f.Error(); err != nil {
		// Installed: do not retry the restore; the next entry moves the
		// applied index on.
		n.log.Warn("restore installed, but the entry after it failed", "err", err)
		return sum, n.raft.LastIndex(), nil
	}
	return sum, f.Index(), nil
}
