package node

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/lockinfo"
)

// The operator actions on the lock table and the state: Revoke,
// EndSession, Backup and Restore (Operator, operator.go).

// Revocation says which grant Revoke ended.
type Revocation struct {
	Lock   string
	Holder lockinfo.Holder // the revoked grant (its token, session and description)
	Index  uint64          // log index of the Revoke
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
func (o *Operator) Revoke(ctx context.Context, lock string, token lockinfo.Token, by, why string) (Revocation, error) {
	n := o.n
	if err := checkCtx(ctx); err != nil {
		return Revocation{}, err
	}
	if err := fsmwire.ValidateLockName(lock); err != nil {
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
	res, index, err := n.propose(ctx, fsm.Revoke{Lock: lock, Token: token, By: by, Why: why})
	if err != nil {
		return Revocation{}, err
	}
	switch res.Status {
	case fsmwire.StatusOK:
	case fsmwire.StatusNotHolder:
		return Revocation{}, fmt.Errorf("%w: lock %q, token %d (released meanwhile)", ErrNotHeld, lock, token)
	default:
		return Revocation{}, fmt.Errorf("%w: %w", ErrInvalidArgument, res.Err())
	}
	n.log.Warn("lock revoked by an operator", "lock", lock, "token", token, "holder_session", h.Session,
		"holder", h.Description, "shared", h.Shared, "permits", h.Permits, "by", by, "why", why, "index", index)
	return Revocation{Lock: lock, Holder: h, Index: index}, nil
}

// versionRevokeShared is the cluster version from which Revoke takes a
// shared grant (fsm.Revoke).
const versionRevokeShared = 4

// grantToRevoke finds, in the local state, the grant of lock that Revoke
// names (see Revoke for token 0).
func (n *Node) grantToRevoke(lock string, token lockinfo.Token) (lockinfo.Holder, error) {
	li, _ := n.fsm.Lock(lock)
	if li.Held && (token == 0 || li.Holder.Token == token) {
		return li.Holder, nil
	}
	var h lockinfo.Holder
	switch {
	case token == 0 && len(li.Shared) == 1:
		h = li.Shared[0]
	case token == 0 && len(li.Shared) > 1:
		return lockinfo.Holder{}, fmt.Errorf("%w: lock %q has %d shared grants (tokens %s): name the one to revoke by its token",
			ErrInvalidArgument, lock, len(li.Shared), tokenList(li.Shared, 8))
	case token == 0:
		return lockinfo.Holder{}, fmt.Errorf("%w: lock %q is not held", ErrNotHeld, lock)
	default:
		i := slices.IndexFunc(li.Shared, func(g lockinfo.Holder) bool { return g.Token == token })
		if i < 0 {
			return lockinfo.Holder{}, fmt.Errorf("%w: lock %q, token %d", ErrNotHeld, lock, token)
		}
		h = li.Shared[i]
	}
	if v := n.fsm.ClusterVersion(); v < versionRevokeShared {
		return lockinfo.Holder{}, fmt.Errorf("%w: revoking a shared grant (token %d of %q) needs cluster version %d (the cluster is at %d)",
			ErrInvalidArgument, h.Token, lock, versionRevokeShared, v)
	}
	return h, nil
}

// tokenList lists the tokens of up to max grants ("3, 5, 9, … (12 in all)").
func tokenList(gs []lockinfo.Holder, max int) string {
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
// an operator's decision, unlike a lapse, see fsm.Release's Lapsed) and drops
// its waits; its client learns at its next keepalive (its leases
// end then). by and why are logged (WARN). Errors: ErrNoSuchSession,
// ErrNoQuorum. Safe for concurrent use.
func (o *Operator) EndSession(ctx context.Context, id lockinfo.SessionID, by, why string) error {
	n := o.n
	if err := checkCtx(ctx); err != nil {
		return err
	}
	if id == 0 {
		return fmt.Errorf("%w: session id 0", ErrInvalidArgument)
	}
	info, _ := n.fsm.Session(id)
	res, index, err := n.propose(ctx, fsm.CloseSession{Session: id})
	if err != nil {
		return err
	}
	if res.Status == fsmwire.StatusNoSession {
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
	LastToken lockinfo.Token
	Sessions  int
	Locks     int
	Bytes     int64
}

// Backup writes the lock table — sessions, locks, holders, queues,
// lock-delays, the token counter — to w, in the snapshot format, as of a
// linearizable read (Sync first: it covers every command committed before
// the call). Any replica can take it. Restore installs it.
func (o *Operator) Backup(ctx context.Context, w io.Writer) (BackupInfo, error) {
	n := o.n
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

// MaxRestoreBytes bounds a backup given to Restore: what the state
// machine stages for one restore (fsm.MaxRestoreStaged; a held lock takes
// about 60 bytes of a backup).
const MaxRestoreBytes = fsmwire.MaxRestoreStaged

// Restore replaces the replicated lock table with a backup (Backup's
// output), on every replica, at one index of the log. What that means for
// a running cluster (see fsm.PrepareRestore):
//
//   - the token counter becomes the higher of the backup's and the
//     cluster's as of the restore's index, so every later grant fences out
//     every token either history handed out — also at a leadership change;
//   - every session of the running cluster ends (its clients find out at
//     their next keepalive; their leases end); the backup's sessions come
//     back under new ids, orphaned, holding and waiting as in the backup,
//     and expire after their TTL plus the leader's takeover grace — their
//     locks then pass to their waiters (or into lock-delay) as at any
//     expiry, so nobody is granted a restored lock for at least a TTL;
//   - the cluster id, the quotas and the Raft configuration stay.
//
// From cluster version 4 a restore is a replicated command (see
// fsm.RestoreCommit): the backup is staged in log entries of 1 MiB (from a
// follower, each forwarded to the leader) and installed by a small commit
// entry, which every replica applies at its index. So:
//
//   - nothing of it is applied anywhere before it commits: a restore that
//     cannot commit (the leader lost its quorum) changes nothing, on any
//     replica;
//   - it takes effect at most once: each call has its own id, and a
//     retried or duplicated commit is answered with the first install's
//     summary;
//   - replicas keep serving reads (of the state before it) while they
//     build the restored state.
//
// Below version 4 (a rolling upgrade) the leader installs it through
// hashicorp/raft's user restore, as the previous release does.
//
// Errors: fsm.ErrInvalidSnapshot (not a backup; nothing changed),
// ErrInvalidArgument (larger than MaxRestoreBytes; nothing changed),
// ErrRefused (the leader refused it: another restore started meanwhile and
// replaced this one's staging, say; nothing changed). ErrNoQuorum when the
// cluster could not commit it in time: together with ErrNotProposed the
// backup was not installed; without it the outcome is unknown — the
// install may have committed (once): read the lock table (Backup, Stats)
// to tell.
func (o *Operator) Restore(ctx context.Context, r io.Reader) (fsm.RestoreSummary, error) {
	n := o.n
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
	if err := fsm.New(nil).Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
		return fsm.RestoreSummary{}, fmt.Errorf("node: restore: %w", err)
	}
	var sum fsm.RestoreSummary
	if n.versionGate(ctx, restoreVersionProbe) == nil {
		sum, err = n.restoreReplicated(ctx, data)
	} else if sum, err = n.restoreThroughRaft(ctx, data); errors.Is(err, errRestoreReplicated) {
		sum, err = n.restoreReplicated(ctx, data) // the leader is at version 4 already
	}
	if err != nil {
		return fsm.RestoreSummary{}, err
	}
	n.log.Warn("lock table restored from a backup", "sessions", sum.Sessions, "locks", sum.Locks,
		"held", sum.Held, "last_token", sum.LastToken, "backup_last_token", sum.BackupLastToken, "backup_index", sum.BackupIndex)
	return sum, nil
}
