package fsm

import (
	"encoding/binary"
	"fmt"

	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/lockinfo"
)

// Revoke force-releases one grant of a lock on an operator's behalf (an
// admin operation, cluster version 3). It is a compare-and-revoke: if the
// grant with Token holds Lock, that grant ends as if its session had
// expired — an exclusive grant enters the session's lock-delay if it has
// one (so that writes the holder still has in flight can drain), and the
// lock passes to the next live waiters otherwise (or when the delay ends).
// From cluster version 4 (versionRevokeShared) the grant may also be a
// shared one: a reader of a lock or a holder of a semaphore's permits,
// which ends at once, as on its session's expiry (only an exclusive grant's
// expiry starts a lock-delay, see the package doc); at version 3 such a
// token answers StatusNotHolder, as version 3 applied it. The next grant
// takes a higher token, so a resource fence refuses the revoked holder
// from then on. The holder's session lives on (its other locks and waits
// stay); its lease on Lock ends when its replica applies the command
// (EventReleased with ReasonRevoked, and Shared or Permits for a shared
// grant).
//
// By and Why say who revoked the grant and why; they are part of the log
// entry (the state machine keeps no history of them). Token is required:
// a retried or delayed Revoke can never end a later grant of the same
// lock. Result: StatusOK with Token = the revoked token; StatusNotHolder if
// no grant with that token holds Lock (released, expired or revoked
// already).
//
// Revoke is a client command (not LeaderOnly): a replica accepts it from
// any caller that may propose commands (lockapi, forwarded requests), so
// who may revoke is decided where the operator's request arrives (the
// admin API's authentication).
type Revoke struct {
	Lock  string
	Token lockinfo.Token
	By    string // who revoked it, at most MaxDescriptionLen bytes
	Why   string // why, at most MaxDescriptionLen bytes
}

// versionRevoke is the cluster version from which Revoke may be written
// and applied; versionRevokeShared the one from which it also takes a
// shared grant (the same command: which grants it matches depends on the
// cluster version in force, so that old and new replicas apply it alike
// during a rolling upgrade).
const (
	versionRevoke              = versionPrimitives
	versionRevokeShared uint64 = 4
)

// op implements Command.
func (Revoke) op() fsmwire.Op { return fsmwire.OpRevoke }

// validate implements Command.
func (c Revoke) validate() error {
	if err := fsmwire.ValidateLockName(c.Lock); err != nil {
		return err
	}
	if c.Token == 0 {
		return fmt.Errorf("%w: revoke needs the token of the grant to revoke", fsmwire.ErrInvalidCommand)
	}
	if err := fsmwire.ValidateDescription(c.By); err != nil {
		return fmt.Errorf("%w (revoked by)", err)
	}
	if err := fsmwire.ValidateDescription(c.Why); err != nil {
		return fmt.Errorf("%w (reason)", err)
	}
	return nil
}

// appendRevoke appends Revoke's body: Lock string, Token uvarint, By
// string, Why string.
// version implements Command.
func (Revoke) version() byte { return fsmwire.EntryV3 }

// exec implements Command.
func (c Revoke) exec(a *applier) Result { return a.revoke(c) }

// appendTo implements Command.
func (c Revoke) appendTo(dst []byte, _ byte) ([]byte, error) {
	dst = append(dst, byte(fsmwire.OpRevoke))
	if len(c.Lock) > fsmwire.MaxLockNameLen || len(c.By) > fsmwire.MaxDescriptionLen || len(c.Why) > fsmwire.MaxDescriptionLen {
		return dst, fmt.Errorf("%w: revoke: lock name or text too long", fsmwire.ErrInvalidEntry)
	}
	dst = fsmwire.AppendString(dst, c.Lock)
	dst = binary.AppendUvarint(dst, uint64(c.Token))
	dst = fsmwire.AppendString(dst, c.By)
	return fsmwire.AppendString(dst, c.Why), nil
}

// decodeRevoke decodes Revoke's body.
func decodeRevoke(d *decoder, _ fsmwire.Op) Command {
	return Revoke{Lock: d.String(fsmwire.MaxLockNameLen), Token: lockinfo.Token(d.Uvarint()), By: d.String(fsmwire.MaxDescriptionLen), Why: d.String(fsmwire.MaxDescriptionLen)}
}

func (a *applier) revoke(c Revoke) Result {
	if a.st.version < versionRevoke {
		return Result{Status: fsmwire.StatusInvalid, Reason: fmt.Sprintf("revoke needs cluster version %d (the cluster is at %d)", versionRevoke, a.st.version)}
	}
	st := a.st
	l := st.locks.get(c.Lock)
	switch {
	case l == nil:
		return Result{Status: fsmwire.StatusNotHolder}
	case l.held && l.holder.token == c.Token:
		l = st.mutLock(c.Lock)
		h := l.holder
		st.uninvolve(h.session, h.owner, c.Lock, h.value)
		if s := st.sessions.get(h.session); s != nil && s.lockDelay > 0 {
			a.delayGrant(c.Lock, l, s, h, fsmwire.ReasonRevoked)
		} else {
			a.endGrant(c.Lock, l, h, fsmwire.ReasonRevoked)
			a.promote(c.Lock, l)
		}
		st.dropIfIdle(c.Lock, l)
		return Result{Status: fsmwire.StatusOK, Token: h.token}
	case st.version < versionRevokeShared:
		return Result{Status: fsmwire.StatusNotHolder} // as version 3 applied it
	}
	h, ok := l.sharedWithToken(c.Token)
	if !ok {
		return Result{Status: fsmwire.StatusNotHolder}
	}
	l = st.mutLock(c.Lock)
	a.endGrant(c.Lock, l, h, fsmwire.ReasonRevoked)
	st.uninvolve(h.session, h.owner, c.Lock, h.value)
	a.promote(c.Lock, l)
	st.dropIfIdle(c.Lock, l)
	return Result{Status: fsmwire.StatusOK, Token: h.token}
}

// sharedWithToken returns the shared grant (a reader, a semaphore's
// holder) with token t, if one holds the lock. O(log shared grants): they
// are in token order.
func (l *lock) sharedWithToken(t lockinfo.Token) (holder, bool) {
	if l.shared == nil {
		return holder{}, false
	}
	return l.shared.withKey(t)
}
