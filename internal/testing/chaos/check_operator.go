package chaos

import "fmt"

// Checks of the operator's actions (History.Operator):
//
//   - operator-once: a restore installs at most once per call — never
//     when the call says it was not proposed or was refused, exactly once
//     when it succeeded; a revocation ends at most one grant (exactly one
//     when it succeeded), and only grants an operator named; a successful
//     end-session ended its session. A reply lost after the leader
//     processed the call, or a duplicate delivery of it, must not make it
//     take effect twice.
//   - no-wedged-replica: once an episode healed, every running replica
//     applied the leader's applied index within the probe's bound
//     (History.CatchUps): none is left stuck, say, on a hole in its log.
//   - bounded-call: no operator call returns more than a TTL after its
//     deadline.
//
// And the documented operator exception (opEnd): an operator's revoke,
// end-session or restore ends a holder's lease before its client learns
// of it, so its client's validity window may overlap the next holder's —
// only where that action ended the older grant in the log before the
// newer one was granted, and only until the older client's lease ran out
// (a TTL after the action at most).

// More check names.
const (
	CheckOperatorOnce = "operator-once"     // an operator action takes effect at most once (exactly once when it succeeded)
	CheckWedged       = "no-wedged-replica" // every replica catches up with the leader after a heal
)

// opEnd is where an operator's action ended a grant: the position in the
// log of the event that did, and when it was first seen applied.
type opEnd struct {
	pos int
	at  int64
	by  string
}

// operatorEnds finds the grants an operator's action ended: released by a
// revocation, by an end-session of their session, or held when a restore
// was installed.
func (c *checker) operatorEnds() map[uint64]opEnd {
	ended := map[uint64]int64{} // session → the earliest end-session call
	for _, op := range c.h.Operator {
		if op.Kind == ActEndSession {
			if t, ok := ended[op.Session]; !ok || op.Invoke < t {
				ended[op.Session] = op.Invoke
			}
		}
	}
	out := map[uint64]opEnd{}
	set := func(token uint64, e opEnd) {
		if _, ok := out[token]; !ok {
			out[token] = e
		}
	}
	for pos, e := range c.log {
		switch {
		case e.Kind == EvReleased && e.Reason == "revoked":
			set(e.Token, opEnd{pos, c.seen(e), "revoked"})
		case e.Kind == EvReleased && e.Reason == "session-closed":
			if t, ok := ended[e.Session]; ok && t <= c.hi[pos] {
				set(e.Token, opEnd{pos, c.seen(e), "end-session"})
			}
		case e.Kind == EvRestored:
			for t := range c.installAt[pos].held {
				set(t, opEnd{pos, c.seen(e), "restore"})
			}
		}
	}
	return out
}

// overlapAllowed reports whether the client window of the grant older may
// still be open when the grant newer begins: an operator's action ended
// older in the log before newer was granted, and the older window closed
// within a TTL of it.
func (c *checker) overlapAllowed(ends map[uint64]opEnd, older, newer uint64, olderTo int64) bool {
	e, ok := ends[older]
	if !ok {
		return false
	}
	g, granted := c.grantPos[newer]
	return granted && e.pos < g && olderTo <= e.at+c.h.TTL+c.o.ClockSlack
}

// checkOperator checks what each operator action did.
func (c *checker) checkOperator() {
	c.r.RestoresInstalled = len(c.installs)
	byCall := map[*OperatorOp][]*restoreInstall{}
	for _, in := range c.installs {
		if in.call == nil {
			c.fail(CheckOperatorOnce, "", "a restore was installed at %s with no restore call before it", c.describeInstall(in))
			continue
		}
		byCall[in.call] = append(byCall[in.call], in)
	}
	revoked := map[uint64][]LogEvent{}
	closed := map[uint64][]LogEvent{}
	for _, e := range c.log {
		switch {
		case e.Kind == EvReleased && e.Reason == "revoked":
			revoked[e.Token] = append(revoked[e.Token], e)
		case e.Kind == EvClosed:
			closed[e.Session] = append(closed[e.Session], e)
		}
	}
	named := map[uint64]bool{}
	for i := range c.h.Operator {
		op := &c.h.Operator[i]
		if c.h.TTL > 0 && op.Deadline != 0 && op.Return > op.Deadline+c.h.TTL {
			c.fail(CheckBoundedCall, op.Lock, "operator %s on %s returned %s after its deadline (%s)", op.Kind, op.Node, durationMS(op.Return-op.Deadline), op.Err)
		}
		switch op.Kind {
		case ActRestore:
			c.checkRestoreCall(op, byCall[op])
		case ActRevoke:
			named[op.Token] = true
			n := len(revoked[op.Token])
			switch {
			case n > 1:
				c.fail(CheckOperatorOnce, op.Lock, "token %d revoked %d times (op %d through %s, %s)", op.Token, n, op.ID, op.Node, op.Via)
			case n == 0 && op.Result == ActOK:
				c.fail(CheckOperatorOnce, op.Lock, "the revocation of token %d succeeded (op %d through %s, %s), but the log never revokes it", op.Token, op.ID, op.Node, op.Via)
			case n == 1 && op.Result == ActNotProposed:
				c.fail(CheckOperatorOnce, op.Lock, "the revocation of token %d was not proposed (op %d through %s, %s: %s), but the log revokes it at index %d", op.Token, op.ID, op.Node, op.Via, op.Err, revoked[op.Token][0].Index)
			case n == 1 && op.Result == ActRefused && c.during(revoked[op.Token][0], op):
				c.r.RefusedAfterEffect++
			}
		case ActEndSession:
			if op.Result == ActOK && len(closed[op.Session]) == 0 {
				c.fail(CheckOperatorOnce, "", "ending session %d succeeded (op %d through %s, %s), but the log never closes it", op.Session, op.ID, op.Node, op.Via)
			}
			if op.Result == ActRefused && len(closed[op.Session]) > 0 && c.during(closed[op.Session][0], op) {
				c.r.RefusedAfterEffect++
			}
		}
	}
	for t, es := range revoked {
		if !named[t] {
			c.fail(CheckOperatorOnce, es[0].Lock, "token %d revoked at index %d, which no operator revoked", t, es[0].Index)
		}
	}
}

// during reports whether log event e was decided while operator call op
// ran.
func (c *checker) during(e LogEvent, op *OperatorOp) bool {
	t := c.decided(e)
	return t >= op.Invoke && t <= op.Return
}

// checkRestoreCall checks the installs attributed to one restore call.
func (c *checker) checkRestoreCall(op *OperatorOp, ins []*restoreInstall) {
	where := func() string {
		var s []string
		for _, in := range ins {
			s = append(s, c.describeInstall(in))
		}
		return fmt.Sprint(s)
	}
	switch {
	case len(ins) > 1:
		c.fail(CheckOperatorOnce, "", "restore op %d (backup %d through %s, %s; %s) installed %d times: %s", op.ID, op.Backup, op.Node, op.Via, op.Result, len(ins), where())
	case len(ins) == 1 && (op.Result == ActNotProposed || op.Result == ActRefused):
		c.fail(CheckOperatorOnce, "", "restore op %d (backup %d through %s, %s) failed as %s (%s), but it was installed at %s", op.ID, op.Backup, op.Node, op.Via, op.Result, op.Err, where())
	case len(ins) == 0 && op.Result == ActOK:
		c.fail(CheckOperatorOnce, "", "restore op %d (backup %d through %s, %s) succeeded, but the log holds no install of it", op.ID, op.Backup, op.Node, op.Via)
	}
}

// checkCatchUps: every replica caught up with the leader after each heal.
func (c *checker) checkCatchUps() {
	for _, cu := range c.h.CatchUps {
		if cu.Done == 0 {
			c.fail(CheckWedged, "", "after %s healed: %s (the leader %s at index %d, within %s)", cu.What, cu.Lagging, cu.Leader, cu.Index, durationMS(cu.Deadline-cu.Start))
		}
	}
}
