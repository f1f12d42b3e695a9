package fsm

import (
	"fmt"
	"slices"
)

func (a *applier) acquire(c Acquire) Result {
	st := a.st
	if st.sessions[c.Session] == nil {
		return Result{Status: StatusNoSession}
	}
	l := st.mutLock(c.Lock)
	if l == nil {
		st.lockSeq++
		l = &lock{gen: st.gen, seq: st.lockSeq}
		st.locks[c.Lock] = l
		st.involve(c.Session, c.Lock)
		return a.grant(c.Lock, l, c.Session, c.Owner)
	}
	a.settle(c.Lock, l)

	// Idempotency: a retried acquisition reports its current status.
	if l.held && l.holder.owner == c.Owner {
		if l.holder.session != c.Session {
			return invalidOwner(c)
		}
		return Result{Status: StatusGranted, Session: c.Session, Token: l.holder.token}
	}
	if p := l.waiters.position(c.Owner); p > 0 {
		if l.waiters.items[p-1].session != c.Session {
			return invalidOwner(c)
		}
		return Result{Status: StatusQueued, Session: c.Session, Position: p}
	}

	switch {
	case !l.held && l.delayUntil == 0:
		// Free: after settle, a free lock has no waiters.
		st.involve(c.Session, c.Lock)
		return a.grant(c.Lock, l, c.Session, c.Owner)
	case c.Wait:
		l.waiters.push(waiter{session: c.Session, owner: c.Owner, enqueuedAt: a.now, enqueuedIx: a.index})
		st.waiters++
		st.involve(c.Session, c.Lock)
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

func invalidOwner(c Acquire) Result {
	return Result{Status: StatusInvalid, Reason: fmt.Sprintf("owner %s of lock %q belongs to another session", c.Owner, c.Lock)}
}

func (a *applier) release(c Release) Result {
	st := a.st
	l := st.mutLock(c.Lock)
	if l == nil {
		return Result{Status: StatusNotHolder}
	}
	if l.held && l.holder.owner == c.Owner {
		h := l.holder
		l.held, l.holder = false, holder{}
		st.held--
		st.uninvolve(h.session, c.Lock, l)
		a.emit(Event{Kind: EventReleased, Lock: c.Lock, Session: h.session, Owner: h.owner, Token: h.token, Reason: ReasonOwner})
		a.promote(c.Lock, l)
		st.dropIfIdle(c.Lock, l)
		return Result{Status: StatusOK}
	}
	if p := l.waiters.position(c.Owner); p > 0 {
		w := l.waiters.removeAt(p - 1)
		st.waiters--
		st.uninvolve(w.session, c.Lock, l)
		a.emit(Event{Kind: EventDequeued, Lock: c.Lock, Session: w.session, Owner: w.owner, Reason: ReasonOwner})
		st.dropIfIdle(c.Lock, l)
		return Result{Status: StatusOK}
	}
	return Result{Status: StatusNotHolder}
}

// tick ends the lock-delays that are over and grants those locks to their
// first waiters, in lock-name order.
func (a *applier) tick() Result {
	st := a.st
	var due []string
	for name, until := range st.delayed {
		if until <= a.now {
			due = append(due, name)
		}
	}
	slices.Sort(due)
	for _, name := range due {
		if l := st.mutLock(name); l != nil {
			a.settle(name, l)
			st.dropIfIdle(name, l)
		}
	}
	return Result{Status: StatusOK, Count: len(due)}
}

// settle ends the lock's delay if it is over and hands the lock to its first
// waiter.
func (a *applier) settle(name string, l *lock) {
	if l.delayUntil == 0 || a.now < l.delayUntil {
		return
	}
	l.delayUntil = 0
	delete(a.st.delayed, name)
	if !l.held {
		a.promote(name, l)
	}
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
