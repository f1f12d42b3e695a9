package main

import "time"

// action is what the lock supervisor does to the command it runs.
type action int

const (
	actNone action = iota // the lease is good: wait until wake
	actTerm               // send SIGTERM (once)
	actKill               // send SIGKILL
)

func (a action) String() string {
	return [...]string{"none", "SIGTERM", "SIGKILL"}[a]
}

// watch is the supervisor's view of the lease: until when it is valid at
// least (counted from when the renewal that told it was sent, so never
// overestimated), whether the replica said it ended, and what has been
// sent to the command so far.
type watch struct {
	deadline time.Time // the lease is valid until then at least
	lost     bool      // the replica said the lease ended (revoked, expired)
	termSent time.Time // zero: not yet
	killSent bool
}

// plan decides, at now, what to do to the command and when to look again
// (wake; zero: nothing left to wait for). The rule: SIGTERM grace before
// the deadline (or at once when the lease is known lost), SIGKILL at the
// deadline or grace after the SIGTERM, whichever is first — so the
// command is killed before its lease can end, and therefore before the
// lock can be granted to anyone else, as long as the replica is reachable
// or not. Pure: the thin loop in lock.go does the I/O.
func plan(w watch, now time.Time, grace time.Duration) (act action, wake time.Time) {
	if w.killSent {
		return actNone, time.Time{}
	}
	killAt := w.deadline
	if !w.termSent.IsZero() && w.termSent.Add(grace).Before(killAt) {
		killAt = w.termSent.Add(grace)
	}
	if !now.Before(killAt) {
		return actKill, time.Time{}
	}
	if w.lost && w.termSent.IsZero() {
		return actTerm, minTime(now.Add(grace), killAt)
	}
	termAt := w.deadline.Add(-grace)
	if w.termSent.IsZero() {
		if !now.Before(termAt) {
			return actTerm, killAt
		}
		return actNone, termAt
	}
	return actNone, killAt
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
