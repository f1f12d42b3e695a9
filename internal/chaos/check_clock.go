package chaos

import "time"

// Lock-delay: a lock released by an expiry that put it into lock-delay is
// not granted again until the delay has passed, in the harness's own time
// (the time of the clients; no replica's wall clock). Observation times are
// when the first replica applied each event, so the slack only covers how
// late the release could have been seen.
func (c *checker) checkLockDelay() {
	d := c.h.LockDelay
	if d == 0 {
		return
	}
	slack := d/10 + int64(100*time.Millisecond)
	delayed := map[string]LogEvent{}
	for _, e := range c.log {
		switch {
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
			if gap := e.Observed - r.Observed; gap < d-slack {
				c.fail(CheckLockDelay, e.Lock, "token %d granted %s after the expiry that put %s into a %s lock-delay (release at index %d, grant at index %d)",
					e.Token, durationMS(gap), e.Lock, durationMS(d), r.Index, e.Index)
			}
		}
	}
}
