package fsm

import (
	"fmt"

	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/lockinfo"
)

// Validation of a decoded lock: what Restore refuses.

// checkLock validates a decoded lock and records its acquisitions in their
// sessions.
func (st *state) checkLock(name string, flags byte, l *lock, v byte) error {
	switch {
	case flags&^(flagHeld|flagDelayed|flagSemaphore) != 0 || (v < snapshotV3 && flags&flagSemaphore != 0):
		return fmt.Errorf("unknown lock flags %#x", flags)
	case st.locks.get(name) != nil:
		return fmt.Errorf("lock %q listed twice", name)
	case v < snapshotV2 && l.delayed && l.delayUntil == 0:
		return fmt.Errorf("lock %q: zero delay end", name)
	case l.delayFor < 0 || l.delayFor > int64(fsmwire.MaxLockDelay) || uint64(l.delayToken) > st.tokenSeq:
		return fmt.Errorf("lock %q: bad delay", name)
	case !l.held && !l.delayed && l.shared.len() == 0:
		return fmt.Errorf("lock %q: neither held nor delayed", name)
	case l.held && l.delayed:
		return fmt.Errorf("lock %q: both held and delayed", name)
	}
	if err := fsmwire.ValidateLockName(name); err != nil {
		return err
	}
	if err := l.checkKind(name); err != nil {
		return err
	}
	var owners map[lockinfo.OwnerID]struct{} // duplicates are only possible with more than one acquisition
	if l.waiters.len()+l.shared.len() > 0 {
		owners = make(map[lockinfo.OwnerID]struct{}, l.waiters.len()+l.shared.len()+1)
	}
	check := func(s lockinfo.SessionID, o lockinfo.OwnerID) error {
		sess := st.sessions.get(s)
		if sess == nil {
			return fmt.Errorf("lock %q: unknown session %d", name, s)
		}
		if o.IsZero() {
			return fmt.Errorf("lock %q: zero owner", name)
		}
		if owners != nil {
			if _, dup := owners[o]; dup {
				return fmt.Errorf("lock %q: duplicate owner %s", name, o)
			}
			owners[o] = struct{}{}
		}
		if sess.acqs == nil {
			sess.acqs = make(map[acqKey]struct{})
		}
		sess.acqs[acqKey{name, o}] = struct{}{}
		return nil
	}
	grant := func(h holder) error {
		if h.token == 0 || uint64(h.token) > st.tokenSeq {
			return fmt.Errorf("lock %q: token %d beyond the counter %d", name, h.token, st.tokenSeq)
		}
		return check(h.session, h.owner)
	}
	if l.held {
		if err := grant(l.holder); err != nil {
			return err
		}
	}
	for h := range l.shared.all() {
		if err := grant(h); err != nil {
			return err
		}
	}
	for w := range l.waiters.all() {
		if err := check(w.session, w.owner); err != nil {
			return err
		}
	}
	return nil
}

// checkKind validates what the kind of a decoded lock implies (snapshot
// version 3): a semaphore has only permit grants that fit its limit, a
// lock only exclusive or only read grants, and in both the head of the
// queue could not be granted (or promote would have granted it).
func (l *lock) checkKind(name string) error {
	bad := func(what string) error { return fmt.Errorf("lock %q: %s", name, what) }
	switch {
	case l.limit < 0 || l.limit > fsmwire.MaxSemaphoreLimit:
		return bad("semaphore limit out of range")
	case l.limit > 0 && (l.held || l.delayed):
		return bad("a semaphore held exclusively or delayed")
	case l.limit > 0 && l.used > l.limit:
		return bad("more permits held than the limit")
	case l.shared.len() > 0 && (l.held || l.delayed):
		return bad("shared grants with an exclusive holder or a delay")
	case l.holder.permits != 0 || len(l.holder.value) > fsmwire.MaxValueLen:
		return bad("bad exclusive holder")
	}
	for h := range l.shared.all() {
		if (l.limit > 0) != (h.permits > 0) {
			return bad("shared grant of the wrong kind")
		}
	}
	for w := range l.waiters.all() {
		if l.limit > 0 && (w.shared || w.permits < 1 || w.permits > l.limit) || l.limit == 0 && w.permits != 0 {
			return bad("waiter of the wrong kind")
		}
	}
	if l.waiters.len() > 0 && l.admits(l.waiters.first()) {
		return bad("the head of the queue could be granted")
	}
	return nil
}
