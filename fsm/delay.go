package fsm

import (
	"slices"

	"github.com/raftlock/raftlock/internal/fsmwire"
)

// Lock-delay. When a session with a lock-delay expires, the locks it held
// stay ungranted for that delay. How the delay ends depends on the cluster
// version:
//
//   - version 1 (the previous release): the delay ends at the leader time
//     now + delay; a Tick, or an Acquire of the lock, at or after that time
//     ends it. A leader whose wall clock is off ends it early or late.
//   - version 2: the state records that the lock is delayed, for how long
//     (delayFor) and by which grant's expiry (delayToken); delayUntil is
//     informational. The leader times the delay on its monotonic clock —
//     from when it applied the expiry, and a new leader afresh, in full,
//     from its takeover — and ends it with EndDelay{Lock, Token}. No
//     wall-clock step on any node can stall or shorten it.

// startDelay puts the lock, whose holder h (of session s) just expired, into
// lock-delay, and returns the delay's end in leader time.
func (a *applier) startDelay(name string, l *lock, s *session, h holder) int64 {
	l.delayUntil = a.now + s.lockDelay
	if a.v2() {
		l.delayed, l.delayFor, l.delayToken = true, s.lockDelay, h.token
	} else {
		l.delayed = l.delayUntil != 0 // as the previous release decided it
	}
	if l.delayed {
		a.st.delayed.set(name, l.delayUntil)
		l.delayNode = s.node
		a.st.use(s.node, usage{locks: 1, bytes: delayBytes(name)})
	}
	return l.delayUntil
}

// tick (version 1) ends the lock-delays that are over at the entry's time
// and grants those locks to their first waiters, in lock-name order. From
// version 2 it is only the leader's takeover barrier.
func (a *applier) tick() Result {
	if a.v2() {
		return Result{Status: fsmwire.StatusOK}
	}
	st := a.st
	var due []string
	for name, until := range st.delayed.all() {
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
	return Result{Status: fsmwire.StatusOK, Count: len(due)}
}

// settle (version 1) ends the lock's delay if it is over at the entry's time
// and hands the lock to its first waiter.
func (a *applier) settle(name string, l *lock) {
	if !l.delayed || a.now < l.delayUntil {
		return
	}
	a.st.clearDelay(name, l)
	if !l.held {
		a.promote(name, l)
	}
}

// endDelay ends the named delays (those that still exist) and grants the
// locks to their first live waiters.
func (a *applier) endDelay(refs []DelayRef) Result {
	st := a.st
	n := 0
	for _, ref := range refs {
		if l := st.locks.get(ref.Lock); l == nil || !l.delayed || l.delayToken != ref.Token {
			continue
		}
		l := st.mutLock(ref.Lock)
		st.clearDelay(ref.Lock, l)
		if !l.held {
			a.promote(ref.Lock, l)
		}
		st.dropIfIdle(ref.Lock, l)
		n++
	}
	return Result{Status: fsmwire.StatusOK, Count: n}
}

// upgradeDelays gives the delays that began at cluster version 1 what
// version 2 times them by: their remaining time at the FSM's clock as
// delayFor, and token 0.
func (st *state) upgradeDelays() {
	for _, name := range slices.Sorted(st.delayed.keys()) {
		l := st.mutLock(name)
		if l == nil || !l.delayed {
			continue
		}
		l.delayFor = min(max(l.delayUntil-st.clock, 0), int64(fsmwire.MaxLockDelay))
		l.delayToken = 0
	}
}
