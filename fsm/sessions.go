package fsm

import (
	"maps"
	"slices"
)

func (a *applier) openSession(c OpenSession) Result {
	st := a.st
	st.sessionSeq++
	id := SessionID(st.sessionSeq)
	st.sessions[id] = &session{
		gen:         st.gen,
		id:          id,
		ttl:         int64(c.TTL),
		lockDelay:   int64(c.LockDelay),
		description: c.Description,
		createdAt:   a.now,
		createdIdx:  a.index,
	}
	a.emit(Event{Kind: EventSessionOpened, Session: id})
	return Result{Status: StatusOK, Session: id}
}

func (a *applier) closeSession(id SessionID, reason Reason) Result {
	s := a.st.sessions[id]
	if s == nil {
		return Result{Status: StatusNoSession}
	}
	a.endSession(s, reason)
	return Result{Status: StatusOK}
}

func (a *applier) expireSessions(ids []SessionID) Result {
	n := 0
	for _, id := range ids {
		if s := a.st.sessions[id]; s != nil {
			a.endSession(s, ReasonSessionExpired)
			n++
		}
	}
	return Result{Status: StatusOK, Count: n}
}

// endSession removes a session: its waits are dropped and the locks it holds
// are released — into lock-delay if the session expired and asked for one,
// otherwise to their next waiter. Locks are visited in name order so that
// every replica grants the same tokens in the same order.
func (a *applier) endSession(s *session, reason Reason) {
	st := a.st
	for _, name := range slices.Sorted(maps.Keys(s.locks)) {
		l := st.mutLock(name)
		if l == nil {
			continue
		}
		l.waiters.removeSession(s.id, func(w waiter) {
			st.waiters--
			a.emit(Event{Kind: EventDequeued, Lock: name, Session: w.session, Owner: w.owner, Reason: reason})
		})
		if l.held && l.holder.session == s.id {
			h := l.holder
			l.held, l.holder = false, holder{}
			st.held--
			ev := Event{Kind: EventReleased, Lock: name, Session: h.session, Owner: h.owner, Token: h.token, Reason: reason}
			if reason == ReasonSessionExpired && s.lockDelay > 0 {
				l.delayUntil = a.now + s.lockDelay
				st.delayed[name] = l.delayUntil
				ev.DelayUntil = l.delayUntil
				a.emit(ev)
			} else {
				a.emit(ev)
				a.promote(name, l)
			}
		}
		st.dropIfIdle(name, l)
	}
	delete(st.sessions, s.id)
	kind := EventSessionClosed
	if reason == ReasonSessionExpired {
		kind = EventSessionExpired
	}
	a.emit(Event{Kind: kind, Session: s.id})
}
