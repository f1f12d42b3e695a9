package fsm

import (
	"fmt"
)

func (a *applier) acquire(c Acquire) Result {
	st := a.st
	s := st.sessions[c.Session]
	if s == nil {
		return Result{Status: StatusNoSession}
	}
	if lim := st.limits.MaxLockNameLen; lim > 0 && len(c.Lock) > lim {
		return quotaResult(QuotaLockName, "lock name of %d bytes (limit %d)", len(c.Lock), lim)
	}
	l := st.mutLock(c.Lock)
	if l == nil {
		if r, refused := a.sessionQuota(s); refused {
			return r
		}
		st.lockSeq++
		l = &lock{gen: st.gen, seq: st.lockSeq}
		st.locks[c.Lock] = l
		st.involve(c.Session, c.Owner, c.Lock)
		return a.grant(c.Lock, l, c.Session, c.Owner)
	}
	if !a.v2() {
		a.settle(c.Lock, l)
	}

	// Idempotency: a new request for an existing acquisition reports its
	// current status.
	if l.held && l.holder.owner == c.Owner {
		if l.holder.session != c.Session {
			return invalidOwner(c)
		}
		return Result{Status: StatusGranted, Session: c.Session, Token: l.holder.token}
	}
	if i := l.waiters.find(c.Owner); i >= 0 {
		if l.waiters.at(i).session != c.Session {
			return invalidOwner(c)
		}
		return Result{Status: StatusQueued, Session: c.Session, Position: l.waiters.position(c.Owner)}
	}

	switch {
	case !l.held && !l.delayed:
		// Free: a free lock has no waiters (a release or a delay's end
		// hands it to the first).
		if r, refused := a.sessionQuota(s); refused {
			return r
		}
		st.involve(c.Session, c.Owner, c.Lock)
		return a.grant(c.Lock, l, c.Session, c.Owner)
	case c.Wait:
		if lim := st.limits.MaxWaitersPerLock; lim > 0 && l.waiters.len() >= lim {
			return quotaResult(QuotaWaiters, "%d waiters on lock %q (limit %d)", l.waiters.len(), c.Lock, lim)
		}
		if r, refused := a.sessionQuota(s); refused {
			return r
		}
		l.waiters.push(waiter{session: c.Session, owner: c.Owner, enqueuedAt: a.now, enqueuedIx: a.index})
		st.waiters++
		st.involve(c.Session, c.Owner, c.Lock)
		a.emit(Event{Kind: EventQueued, Lock: c.Lock, Session: c.Session, Owner: c.Owner})
		return Result{Status: StatusQueued, Session: c.Session, Position: l.waiters.len()}
	default:
		r := Result{Status: StatusLocked, Session: c.Session, DelayUntil: l.delayUntil}
		if l.held {
			r.Holder = a.describe(l.holder)
		}
		return r
	}
}

// sessionQuota refuses a new acquisition of a session at its limit.
func (a *applier) sessionQuota(s *session) (Result, bool) {
	if lim := a.st.limits.MaxLocksPerSession; lim > 0 && len(s.acqs) >= lim {
		return quotaResult(QuotaSessionLocks, "session %d holds or waits for %d locks (limit %d)", s.id, len(s.acqs), lim), true
	}
	return Result{}, false
}

func invalidOwner(c Acquire) Result {
	return Result{Status: StatusInvalid, Reason: fmt.Sprintf("owner %s of lock %q belongs to another session", c.Owner, c.Lock)}
}

func (a *applier) release(c Release) Result {
	st := a.st
	if c.Session != 0 && st.sessions[c.Session] == nil {
		return Result{Status: StatusNoSession}
	}
	l := st.locks[c.Lock]
	switch {
	case l == nil:
		return Result{Status: StatusNotHolder}
	case l.held && l.holder.owner == c.Owner:
		if c.Session != 0 && l.holder.session != c.Session {
			return Result{Status: StatusNotHolder}
		}
		l = st.mutLock(c.Lock)
		h := l.holder
		l.held, l.holder = false, holder{}
		st.held--
		st.uninvolve(h.session, h.owner, c.Lock)
		a.emit(Event{Kind: EventReleased, Lock: c.Lock, Session: h.session, Owner: h.owner, Token: h.token, Reason: ReasonOwner})
		a.promote(c.Lock, l)
		st.dropIfIdle(c.Lock, l)
		return Result{Status: StatusOK}
	}
	i := l.waiters.find(c.Owner)
	if i < 0 || (c.Session != 0 && l.waiters.at(i).session != c.Session) {
		return Result{Status: StatusNotHolder}
	}
	l = st.mutLock(c.Lock) // a private copy has other slots: find again
	w := l.waiters.removeSlot(l.waiters.find(c.Owner))
	st.waiters--
	st.uninvolve(w.session, w.owner, c.Lock)
	a.emit(Event{Kind: EventDequeued, Lock: c.Lock, Session: w.session, Owner: w.owner, Reason: ReasonOwner})
	st.dropIfIdle(c.Lock, l)
	return Result{Status: StatusOK}
}

// promote grants a free lock to the first waiter whose session is alive.
func (a *applier) promote(name string, l *lock) {
	for l.waiters.len() > 0 {
		w := l.waiters.popFront()
		a.st.waiters--
		if a.st.sessions[w.session] == nil {
			// Unreachable while sessions drop their waits when they end;
			// kept so that a corrupt queue can never grant to the dead.
			a.emit(Event{Kind: EventDequeued, Lock: name, Session: w.session, Owner: w.owner, Reason: ReasonSessionExpired})
			continue
		}
		a.grant(name, l, w.session, w.owner)
		a.events[len(a.events)-1].FromQueue = true
		return
	}
}

func (a *applier) grant(name string, l *lock, s SessionID, owner OwnerID) Result {
	a.st.tokenSeq++
	t := Token(a.st.tokenSeq)
	l.held = true
	a.st.held++
	l.holder = holder{session: s, owner: owner, token: t, acquiredAt: a.now, acquiredIdx: a.index}
	a.emit(Event{Kind: EventGranted, Lock: name, Session: s, Owner: owner, Token: t})
	return Result{Status: StatusGranted, Session: s, Token: t}
}

func (a *applier) describe(h holder) Holder {
	return a.st.describe(h)
}

func (st *state) describe(h holder) Holder {
	d := Holder{Session: h.session, Owner: h.owner, Token: h.token, AcquiredAt: h.acquiredAt, AcquiredIdx: h.acquiredIdx}
	if s := st.sessions[h.session]; s != nil {
		d.Description = s.description
	}
	return d
}
