package chaos

import "time"

// Lock-delay: a lock released by an expiry of a session with a lock-delay
// is not granted again until the delay has passed, in the harness's own time
// (the time of the clients; no replica's wall clock). Observation times are
// when the first replica applied each event.
//
// Which releases start a delay is not taken from the state machine alone:
// an expiry of a session the workload opened with a lock-delay
// (History.DelaySessions) that releases a lock must start one, and the
// grant after it is checked either way.
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
	for _, e := range c.log {
		switch {
		case e.Kind == EvReleased && e.Reason == "session-expired" && mustDelay[e.Session] && !e.Delayed:
			c.fail(CheckLockDelay, e.Lock, "the expiry of session %d released token %d at index %d without starting its %s lock-delay",
				e.Session, e.Token, e.Index, durationMS(d))
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
				c.fail(CheckLockDelay, e.Lock, "token %d granted %s after the expiry that put %s into a %s lock-delay (release at index %d, grant at index %d)",
					e.Token, durationMS(gap), e.Lock, durationMS(want), r.Index, e.Index)
			}
		}
	}
}

// delayTimerSlack is how much earlier than a version-2 lock-delay's end a
// grant may be seen: timers and observations share the harness's clock.
const delayTimerSlack = time.Millisecond
