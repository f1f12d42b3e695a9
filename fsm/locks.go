package fsm

import (
	"fmt"

	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/lockinfo"
)

func (a *applier) acquire(c Acquire) Result {
	st := a.st
	s := st.sessions.get(c.Session)
	if s == nil {
		return Result{Status: fsmwire.StatusNoSession}
	}
	if lim := st.limits.MaxLockNameLen; lim > 0 && len(c.Lock) > lim {
		return quotaResult(fsmwire.QuotaLockName, "lock name of %d bytes (limit %d)", len(c.Lock), lim)
	}
	req := waiter{session: c.Session, owner: c.Owner, enqueuedAt: a.now, enqueuedIx: a.index,
		shared: c.Shared, permits: c.Permits, value: c.Value, node: s.node}
	l := st.mutLock(c.Lock)
	if l == nil {
		if r, refused := a.acquisitionQuota(s, c.Lock, c.Value); refused {
			return r
		}
		l = st.newLock(c.Lock, c.Limit)
		st.involve(c.Session, c.Owner, c.Lock, c.Value)
		return a.grant(c.Lock, l, req)
	}
	if r, conflict := l.conflict(c); conflict {
		return r
	}
	if !a.v2() {
		a.settle(c.Lock, l)
	}

	// Idempotency: a new request for an existing acquisition reports its
	// current status.
	if h, ok := l.grantOf(c.Owner); ok {
		if h.session != c.Session || !l.sameKind(h, c) {
			return invalidOwner(c)
		}
		return Result{Status: fsmwire.StatusGranted, Session: c.Session, Token: h.token}
	}
	if i := l.waiters.find(c.Owner); i >= 0 {
		if w := l.waiters.at(i); w.session != c.Session || w.shared != c.Shared || w.permits != c.Permits {
			return invalidOwner(c)
		}
		return Result{Status: fsmwire.StatusQueued, Session: c.Session, Position: l.waiters.position(c.Owner)}
	}

	switch {
	case l.waiters.len() == 0 && l.admits(req):
		// Nobody waits and it fits (a free lock has no waiters: a release
		// or a delay's end hands it to the first).
		if r, refused := a.acquisitionQuota(s, c.Lock, c.Value); refused {
			st.dropIfIdle(c.Lock, l) // a version-1 delay that settle just ended leaves it idle
			return r
		}
		st.involve(c.Session, c.Owner, c.Lock, c.Value)
		return a.grant(c.Lock, l, req)
	case c.Wait:
		if r, refused := a.waitQuota(l, s, c.Lock); refused {
			return r
		}
		if r, refused := a.acquisitionQuota(s, c.Lock, c.Value); refused {
			return r
		}
		l.waiters.push(req)
		st.waiters++
		st.involve(c.Session, c.Owner, c.Lock, c.Value)
		a.emit(Event{Kind: fsmwire.EventQueued, Lock: c.Lock, Session: c.Session, Owner: c.Owner, Shared: c.Shared, Permits: c.Permits})
		return Result{Status: fsmwire.StatusQueued, Session: c.Session, Position: l.waiters.len()}
	default:
		r := Result{Status: fsmwire.StatusLocked, Session: c.Session, DelayUntil: l.delayUntil}
		switch {
		case l.held:
			r.Holder = a.describe(l.holder)
		case l.limit > 0:
			r.Count = l.limit - l.used // permits free
		}
		return r
	}
}

// sessionQuota refuses a new acquisition of a session at its limit.
func (a *applier) sessionQuota(s *session) (Result, bool) {
	if lim := a.st.limits.MaxLocksPerSession; lim > 0 && len(s.acqs) >= lim {
		return quotaResult(fsmwire.QuotaSessionLocks, "session %d holds or waits for %d locks (limit %d)", s.id, len(s.acqs), lim), true
	}
	return Result{}, false
}

func invalidOwner(c Acquire) Result {
	return Result{Status: fsmwire.StatusInvalid, Reason: fmt.Sprintf("owner %s of lock %q belongs to another session", c.Owner, c.Lock)}
}

func (a *applier) release(c Release) Result {
	st := a.st
	if c.Session != 0 && st.sessions.get(c.Session) == nil {
		return Result{Status: fsmwire.StatusNoSession}
	}
	l := st.locks.get(c.Lock)
	mine := func(s lockinfo.SessionID) bool { return c.Session == 0 || s == c.Session }
	if l == nil {
		return Result{Status: fsmwire.StatusNotHolder}
	}
	if h, ok := l.grantOf(c.Owner); ok {
		if !mine(h.session) {
			return Result{Status: fsmwire.StatusNotHolder}
		}
		l = st.mutLock(c.Lock)
		a.endGrant(c.Lock, l, h, fsmwire.ReasonOwner)
		st.uninvolve(h.session, h.owner, c.Lock, h.value)
		a.promote(c.Lock, l)
		st.dropIfIdle(c.Lock, l)
		return Result{Status: fsmwire.StatusOK}
	}
	i := l.waiters.find(c.Owner)
	if i < 0 || !mine(l.waiters.at(i).session) {
		return Result{Status: fsmwire.StatusNotHolder}
	}
	l = st.mutLock(c.Lock) // a private copy has other slots: find again
	w := l.waiters.removeSlot(l.waiters.find(c.Owner))
	st.waiters--
	st.uninvolve(w.session, w.owner, c.Lock, w.value)
	a.emit(Event{Kind: fsmwire.EventDequeued, Lock: c.Lock, Session: w.session, Owner: w.owner, Reason: fsmwire.ReasonOwner})
	a.promote(c.Lock, l) // the waiter may have stopped those behind it
	st.dropIfIdle(c.Lock, l)
	return Result{Status: fsmwire.StatusOK}
}

// endGrant takes the grant h (exclusive or shared) away from the lock and
// reports it released; the caller promotes the waiters.
func (a *applier) endGrant(name string, l *lock, h holder, reason fsmwire.Reason) {
	shared := !l.held || l.holder.owner != h.owner
	if shared {
		a.st.removeShared(l, h)
	} else {
		l.held, l.holder = false, holder{}
		a.st.held--
	}
	a.emit(Event{Kind: fsmwire.EventReleased, Lock: name, Session: h.session, Owner: h.owner, Token: h.token, Reason: reason,
		Shared: shared && l.limit == 0, Permits: h.permits})
}

// promote grants the lock to the waiters at the head of its queue, in FIFO
// order, while it admits them (one exclusive waiter, or the readers up to
// the next writer, or the semaphore requests that fit). Waiters of ended
// sessions are dropped on the way.
func (a *applier) promote(name string, l *lock) {
	for l.waiters.len() > 0 {
		w := l.waiters.first()
		if a.st.sessions.get(w.session) == nil {
			// Unreachable while sessions drop their waits when they end;
			// kept so that a corrupt queue can never grant to the dead.
			l.waiters.popFront()
			a.st.waiters--
			a.emit(Event{Kind: fsmwire.EventDequeued, Lock: name, Session: w.session, Owner: w.owner, Reason: fsmwire.ReasonSessionExpired})
			continue
		}
		if !l.admits(w) {
			return
		}
		l.waiters.popFront()
		a.st.waiters--
		a.grant(name, l, w)
		a.events[len(a.events)-1].FromQueue = true
	}
}

// grant gives the lock to the acquisition w: the exclusive holder, or a
// shared grant (a reader, a semaphore's permits), with the next token.
func (a *applier) grant(name string, l *lock, w waiter) Result {
	a.st.tokenSeq++
	t := lockinfo.Token(a.st.tokenSeq)
	h := holder{session: w.session, owner: w.owner, token: t, acquiredAt: a.now, acquiredIdx: a.index, permits: w.permits, value: w.value}
	if w.shared || l.limit > 0 {
		a.st.addShared(l, h)
	} else {
		l.held, l.holder = true, h
		a.st.held++
	}
	a.emit(Event{Kind: fsmwire.EventGranted, Lock: name, Session: w.session, Owner: w.owner, Token: t, Shared: w.shared, Permits: w.permits, Value: w.value})
	return Result{Status: fsmwire.StatusGranted, Session: w.session, Token: t}
}

func (a *applier) describe(h holder) lockinfo.Holder {
	return a.st.describe(h)
}

func (st *state) describe(h holder) lockinfo.Holder {
	d := lockinfo.Holder{Session: h.session, Owner: h.owner, Token: h.token, AcquiredAt: h.acquiredAt, AcquiredIdx: h.acquiredIdx,
		Permits: h.permits, Value: h.value}
	if s := st.sessions.get(h.session); s != nil {
		d.Description = s.description
	}
	return d
}
