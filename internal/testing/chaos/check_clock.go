package chaos

import "time"

// Lock-delay: a lock released by an expiry of a session with a lock-delay
// is not granted again until the delay has passed, in the harness's own time
// (the time of the clients; no replica's wall clock). Observation times are
// when the first replica applied each event.
//
// Which releases start a delay is not taken from the state machine alone:
// an expiry of a session the workload opened with a lock-delay
// (History.DelaySessions) that releases an exclusive grant must start
// one, and so must any other end of a lease that lapsed (lapses): the
// close of a session whose lease lapsed on its client, an Unlock sent
// after the lapse. The grant after it is checked either way; a restore
// replaces the delays with its backup's.
//
// How early a grant may be seen depends on how the delay is timed:
//
//   - cluster version 2 and later (LogEvent.DelayFor set): the leader times
//     the delay on its monotonic clock from its own apply of the release,
//     and a new leader afresh from its takeover. No replica sees the grant
//     (it waits for the EndDelay the leader proposes then) before
//     DelayFor has passed since the release was first seen applied: the
//     slack is only the harness's timer granularity.
//   - version 1: the delay ends at a leader wall-clock time stamped before
//     the release committed, so the release's commit latency counts
//     against it: a tenth of the delay plus 100 ms.
func (c *checker) checkLockDelay() {
	d := c.h.LockDelay
	if d == 0 {
		return
	}
	mustDelay := map[uint64]bool{}
	for _, id := range c.h.DelaySessions {
		mustDelay[id] = true
	}
	delayed := map[string]LogEvent{}
	lapse := c.lapses()
	for k, e := range c.log {
		exclusive := !e.Shared && e.Permits == 0
		switch {
		case e.Kind == EvRestored:
			clear(delayed) // the backup's lock-delays replace them
		case e.Kind == EvReleased && exclusive && mustDelay[e.Session] && !e.Delayed && lapse(k, e) != "":
			c.fail(CheckLockDelay, e.Lock, "the %s of session %d released token %d at index %d without starting its %s lock-delay",
				lapse(k, e), e.Session, e.Token, e.Index, durationMS(d))
			delayed[e.Lock] = e
		case e.Kind == EvReleased && e.Delayed:
			delayed[e.Lock] = e
		case e.Kind == EvGranted:
			r, ok := delayed[e.Lock]
			if !ok {
				continue
			}
			delete(delayed, e.Lock)
			if r.Observed == 0 || e.Observed == 0 {
				continue
			}
			want, slack := d, d/10+int64(100*time.Millisecond)
			if r.DelayFor > 0 {
				want, slack = r.DelayFor, int64(delayTimerSlack)
			}
			if gap := e.Observed - r.Observed; gap < want-slack {
				c.fail(CheckLockDelay, e.Lock, "token %d granted %s after the release (%s) that put %s into a %s lock-delay (release at index %d, grant at index %d)",
					e.Token, durationMS(gap), r.Reason, e.Lock, durationMS(want), r.Index, e.Index)
			}
		}
	}
}

// lapses returns a function that says how the release at log position k
// ended a lease that had lapsed — the session's expiry, a close of a
// session whose lease had lapsed on its client ("lapse"), an Unlock after
// the lease was lost ("release after the lapse") — or "" when it did not:
// the owner's Unlock, a close its client asked for while the session was
// healthy (History.Closes), an operator's end-session or revocation. Such
// a release of an exclusive grant must start the session's lock-delay,
// whoever notices the lapse first (the client's library, or the leader).
func (c *checker) lapses() func(k int, e LogEvent) string {
	voluntary := map[uint64]int64{} // session → its earliest healthy close
	for _, cl := range c.h.Closes {
		if t, ok := voluntary[cl.Session]; !ok || cl.At < t {
			voluntary[cl.Session] = cl.At
		}
	}
	for _, op := range c.h.Operator {
		if op.Kind == ActEndSession {
			if t, ok := voluntary[op.Session]; !ok || op.Invoke < t {
				voluntary[op.Session] = op.Invoke
			}
		}
	}
	return func(k int, e LogEvent) string {
		switch e.Reason {
		case "session-expired":
			return "expiry"
		case "session-closed":
			if t, ok := voluntary[e.Session]; ok && t <= c.hi[k] {
				return ""
			}
			return "lapse"
		case "owner":
			if g := c.opGrant[e.Token]; g != nil && g.Lost != 0 && g.Lost <= c.lo[k] {
				return "release after the lapse"
			}
		}
		return ""
	}
}

// delayTimerSlack is how much earlier than a version-2 lock-delay's end a
// grant may be seen: timers and observations share the harness's clock.
const delayTimerSlack = time.Millisecond
