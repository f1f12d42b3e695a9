package fsm

import (
	"fmt"

	"github.com/raftlock/raftlock/internal/fsmwire"
)

// A lapse: the validity a client counts for a session ran out without a
// renewal — its process paused, its keepalives failed — and the client
// noticed before the leader expired the session (the client's deadline is
// the earlier one by design: it ends its leases before anyone else can be
// granted their locks). What the client then sends to clean up must not
// skip the lock-delay that the leader's expiry would have started, or a
// paused holder's stalled writes would meet the next holder's with no delay
// between them. So the lapsed forms of CloseSession and Release have
// expiry semantics:
//
//   - CloseSession with Lapsed ends the session exactly as ExpireSessions
//     does: the exclusive grants it holds enter its lock-delay (if it has
//     one), its shared grants and permits are free at once, its waits are
//     dropped; the events say the session expired (ReasonSessionExpired).
//   - Release with Lapsed ends one acquisition of a session the same way:
//     an exclusive grant enters the session's lock-delay, a shared grant or
//     a wait ends at once. The session itself lives on (the lapsed close,
//     or the leader's expiry, follows).
//
// Either form is sent by whoever notices the lapse first: the session's
// library (lockapi: a lost session's close, an Unlock after the lapse) or
// the keeper of leases held for HTTP clients (package admin). A voluntary
// CloseSession or Release — sent while the client's validity lasts — keeps
// its meaning: no lock-delay (an operator's end of a session included).
//
// Cluster version 4 (versionLapse). The lapsed forms are ops 44 and 45 in
// entry version 4, with the bodies of CloseSession and Release of entry
// version 2. Below version 4 the node writes the plain forms (Downgrade):
// during a rolling upgrade a lapse that the client notices first still
// releases without the delay, as the previous release did, until the
// version is raised.

// The lapsed forms' type bytes (entry version 4).

// versionLapse is the cluster version from which the lapsed forms may be
// written and applied.
const versionLapse uint64 = 4

// releaseLapsed is Release with Lapsed: the acquisition (of its session)
// ends as on the session's expiry.
func (a *applier) releaseLapsed(c Release) Result {
	st := a.st
	s := st.sessions.get(c.Session)
	if s == nil {
		return Result{Status: fsmwire.StatusNoSession}
	}
	l := st.locks.get(c.Lock)
	if l == nil || !l.held || l.holder.owner != c.Owner || l.holder.session != c.Session || s.lockDelay == 0 {
		return a.release(c) // a shared grant, a wait, or no delay: as a release
	}
	l = st.mutLock(c.Lock)
	h := l.holder
	st.uninvolve(h.session, h.owner, c.Lock, h.value)
	a.delayGrant(c.Lock, l, s, h, fsmwire.ReasonSessionExpired)
	st.dropIfIdle(c.Lock, l)
	return Result{Status: fsmwire.StatusOK}
}

// delayGrant ends the exclusive grant h of session s (which has a
// lock-delay) into that delay: the lock stays ungranted until the leader
// ends the delay (EndDelay), and the release event says for how long.
func (a *applier) delayGrant(name string, l *lock, s *session, h holder, reason fsmwire.Reason) {
	l.held, l.holder = false, holder{}
	a.st.held--
	ev := Event{Kind: fsmwire.EventReleased, Lock: name, Session: h.session, Owner: h.owner, Token: h.token, Reason: reason}
	ev.DelayUntil = a.startDelay(name, l, s, h)
	if a.v2() {
		ev.DelayFor = durationOf(s.lockDelay)
		ev.DelayToken = h.token
	}
	a.emit(ev)
}

// validateLapsed checks what the lapsed form of a release needs: its
// session (the lock-delay is the session's).
func validateLapsed(c Release) error {
	if c.Lapsed && c.Session == 0 {
		return fmt.Errorf("%w: a lapsed release needs its session", fsmwire.ErrInvalidCommand)
	}
	return nil
}
