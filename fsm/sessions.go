package fsm

import (
	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/lockinfo"
)

func (a *applier) openSession(c OpenSession) Result {
	st := a.st
	reserved, r, refused := a.admitSession(c)
	if refused {
		return r
	}
	st.sessionSeq++
	id := lockinfo.SessionID(st.sessionSeq)
	s := &session{
		gen:         st.gen,
		id:          id,
		ttl:         int64(c.TTL),
		lockDelay:   int64(c.LockDelay),
		description: c.Description,
		node:        c.Node,
		reserved:    reserved,
		createdAt:   a.now,
		createdIdx:  a.index,
		renewedAt:   a.index,
	}
	st.sessions.set(id, s)
	st.use(s.node, s.usage())
	a.emit(Event{Kind: fsmwire.EventSessionOpened, Session: id})
	return Result{Status: fsmwire.StatusOK, Session: id}
}

func (a *applier) closeSession(id lockinfo.SessionID, reason fsmwire.Reason) Result {
	s := a.st.sessions.get(id)
	if s == nil {
		return Result{Status: fsmwire.StatusNoSession}
	}
	a.endSession(s, reason)
	return Result{Status: fsmwire.StatusOK}
}

func (a *applier) expireSessions(ids []lockinfo.SessionID) Result {
	n := 0
	for _, id := range ids {
		if s := a.st.sessions.get(id); s != nil {
			a.endSession(s, fsmwire.ReasonSessionExpired)
			n++
		}
	}
	return Result{Status: fsmwire.StatusOK, Count: n}
}

// endSession removes a session: its waits are dropped and the grants it
// holds are released — an exclusive one into lock-delay if the session
// expired and asked for one, otherwise to the next waiters. Locks are
// visited in name order, a lock's waiters of the session in FIFO order and
// its shared grants in token order, so that every replica grants the same
// tokens in the same order. It costs O(k log k) in the session's k
// acquisitions (plus the grants it makes), whatever the length of the
// queues they are in.
func (a *applier) endSession(s *session, reason fsmwire.Reason) {
	st := a.st
	byLock := make(map[string][]lockinfo.OwnerID, len(s.acqs))
	for k := range s.acqs {
		byLock[k.lock] = append(byLock[k.lock], k.owner)
	}
	for _, name := range s.lockNames() {
		l := st.mutLock(name)
		if l == nil {
			continue
		}
		l.waiters.removeOwners(byLock[name], func(w waiter) {
			st.waiters--
			a.emit(Event{Kind: fsmwire.EventDequeued, Lock: name, Session: w.session, Owner: w.owner, Reason: reason})
		})
		if l.shared.len() > 0 {
			for _, h := range l.sharedOf(byLock[name]) {
				a.endGrant(name, l, h, reason)
			}
		}
		if l.held && l.holder.session == s.id {
			if reason == fsmwire.ReasonSessionExpired && s.lockDelay > 0 {
				a.delayGrant(name, l, s, l.holder, reason)
			} else {
				a.endGrant(name, l, l.holder, reason)
			}
		}
		a.promote(name, l)
		st.dropIfIdle(name, l)
	}
	st.sessions.del(s.id)
	st.use(s.node, s.usage().add(usage{locks: len(s.acqs), bytes: s.acqBytes}).neg())
	kind := fsmwire.EventSessionClosed
	if reason == fsmwire.ReasonSessionExpired {
		kind = fsmwire.EventSessionExpired
	}
	a.emit(Event{Kind: kind, Session: s.id})
}
