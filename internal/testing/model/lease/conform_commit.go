package lease

import (
	"fmt"
	"slices"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/fsmwire"
)

// The log's commands in a replay: each one that touches the session or
// the lock is committed where the run's log has it, and the model's state
// after it must be the run's.

// modelEntry returns the model entry of the run's command k for this
// replay, if it has one: a takeover marker, an entry of the session (its
// open, its client's commands on the lock, Renewed and ExpireSessions
// naming it), EndDelay of its lock-delay. The other sessions' commands on
// the lock have none: client 1 follows their effect (syncOthers).
func (in *sessionReplay) modelEntry(k int) (entry, bool) {
	rc := &in.c.log.cmds[k]
	switch c := rc.cmd.(type) {
	case fsm.Takeover:
		ch, ok := in.changes[rc.term]
		if !ok {
			ch = in.r.first().L.Changes + 100 // a term whose leader never began its duties: a plain marker
		}
		return entry{Kind: eMarker, Arg: ch}, true
	case fsm.Renewed:
		if slices.Contains(c.Sessions, in.sess) {
			return entry{Kind: eRenewed, C: cS, Arg: in.changes[rc.term]}, true
		}
	case fsm.ExpireSessions:
		if slices.Contains(c.Sessions, in.sess) {
			return entry{Kind: eExpire, C: cS}, true
		}
	case fsm.OpenSession:
		if in.c.log.opened[in.sess] == k && in.opened != nil {
			return *in.opened, true
		}
	case fsm.CloseSession:
		if c.Session == in.sess && !rc.dup {
			e, ok := in.decided[c.Seq]
			return e, ok
		}
	case fsm.Acquire:
		if c.Session == in.sess && c.Lock == in.lock && !rc.dup {
			e, ok := in.decided[c.Seq]
			return e, ok
		}
	case fsm.Release:
		if c.Session == in.sess && c.Lock == in.lock && !rc.dup {
			e, ok := in.decided[c.Seq]
			return e, ok
		}
	case fsm.EndDelay:
		for _, d := range c.Delays {
			if d.Lock == in.lock && in.lock != "" && in.delayTk != 0 && d.Token == in.delayTk {
				return entry{Kind: eEndDelay, Arg: in.r.first().F.DelayTok}, true
			}
		}
	}
	return entry{}, false
}

// mine reports whether command k is one of the session's that the replay
// must find a model entry for.
func (in *sessionReplay) mine(k int) bool {
	rc := &in.c.log.cmds[k]
	switch c := rc.cmd.(type) {
	case fsm.OpenSession:
		return in.c.log.opened[in.sess] == k
	case fsm.CloseSession:
		return c.Session == in.sess && !rc.dup
	case fsm.Acquire:
		return c.Session == in.sess && c.Lock == in.lock && !rc.dup
	case fsm.Release:
		return c.Session == in.sess && c.Lock == in.lock && !rc.dup
	}
	return false
}

func (in *sessionReplay) command(k int) {
	in.cmdDone = k
	rc := &in.c.log.cmds[k]
	if rc.term > in.leaderTerm {
		// An entry of a later term: its leader was elected (its duties
		// may not have begun yet).
		in.newLeader(rc.term, rc.at)
		if in.mismatch != nil || in.stopped != "" {
			return
		}
	}
	touchesLock := in.lock != "" && in.track[k] != nil
	switch c := rc.cmd.(type) {
	case fsm.RestoreCommit:
		in.outOfScope("an operator's restore")
		return
	case fsm.Revoke:
		if c.Lock == in.lock || touchesLock {
			in.outOfScope("an operator's revoke")
			return
		}
	case fsm.Tick:
		// The barrier below cluster version 4 (the first leader's, as the
		// cluster forms): a read, not a marker.
		if rc.term == in.leaderTerm && in.r.first().L.Phase == phaseElected {
			if !in.step(in.r.with(func(st *step) bool { return st.readBarrier() })) {
				in.fail(rc.at, "a Tick barrier", "the model's leader cannot take over")
			}
		}
		return
	case fsm.OpenSession:
		if in.c.log.opened[in.sess] == k && in.opened == nil {
			// No client told of this session (its OpenSession was sent
			// again after the client gave up): nobody keeps it alive; it
			// counts from its commit.
			in.openDecided(rc.at)
		}
	}
	e, isModel := in.modelEntry(k)
	if !isModel && in.mine(k) {
		if alive := in.r.first().F.Alive[cS]; !alive {
			isModel = false // a command of an ended session: a no-op
		} else {
			in.outOfScope("a command of the session that its client did not report")
			return
		}
	}
	if !isModel && !touchesLock && !in.endsSession(rc) {
		return
	}
	if e.Kind == eAcquire && rc.res.Status != fsmwire.StatusGranted && rc.res.Status != fsmwire.StatusQueued && rc.res.Status != fsmwire.StatusLocked {
		in.outOfScope("an acquisition refused by a quota or a conflict")
		return
	}
	var after lockState
	if touchesLock {
		after = *in.track[k]
	}
	what := fmt.Sprintf("index %d: %s", rc.index, fsm.OpOf(rc.cmd))
	if touchesLock && in.r.first().C[cO].Seq >= 250 {
		in.outOfScope("more acquisitions of the lock by other sessions than the model's counters hold")
		return
	}
	if touchesLock && !in.step(in.r.with(func(st *step) bool { return st.othersLeave(cO, in.othersHold(after), in.othersWait(after)) })) {
		in.fail(rc.at, what, "the other sessions' part of the lock cannot follow the run")
		return
	}
	if isModel {
		proposed := len(in.pend) > 0 && in.pend[0] == k
		if proposed {
			in.pend = in.pend[1:]
		}
		if !in.step(in.r.with(func(st *step) bool { return st.commitEntry(e, proposed) })) {
			in.fail(rc.at, what, "the model's leader cannot commit %s here", entryText(e))
			return
		}
	}
	if touchesLock && !in.step(in.r.with(func(st *step) bool { return st.othersJoin(cO, in.othersHold(after), in.othersWait(after)) })) {
		in.fail(rc.at, what, "the other sessions cannot take or wait for the lock as in the run (the model's lock: %s)", in.modelLock())
		return
	}
	for _, ev := range rc.evs {
		if ev.Session != in.sess {
			continue
		}
		switch ev.Kind {
		case fsmwire.EventSessionOpened:
			in.alive, in.existed = true, true
		case fsmwire.EventSessionExpired, fsmwire.EventSessionClosed:
			in.alive = false
		}
	}
	in.check(k, after, touchesLock)
}

// endsSession reports whether command k ended the session.
func (in *sessionReplay) endsSession(rc *runCmd) bool {
	for _, e := range rc.evs {
		if e.Session == in.sess && (e.Kind == fsmwire.EventSessionExpired || e.Kind == fsmwire.EventSessionClosed) {
			return true
		}
	}
	return false
}

// othersHold: in the run, another session holds the lock, or the lock is
// in the lock-delay another session's grant left.
func (in *sessionReplay) othersHold(s lockState) bool {
	return s.holder != 0 && s.holder != in.sess || s.holder == 0 && s.delayed && s.delayBy != in.sess
}

// othersWait: another session waits (and none holds).
func (in *sessionReplay) othersWait(s lockState) bool {
	return !in.othersHold(s) && s.others(in.sess)
}

// check compares the model's state after command k with the run's.
func (in *sessionReplay) check(k int, after lockState, touchesLock bool) {
	rc := &in.c.log.cmds[k]
	alive := in.alive
	what := fmt.Sprintf("index %d: %s", rc.index, fsm.OpOf(rc.cmd))
	if !in.r.keep(func(s *State) bool { return s.F.Alive[cS] == alive }) {
		in.fail(rc.at, what, "the run's session is alive: %v; the model's is not", alive)
		return
	}
	if !touchesLock {
		return
	}
	in.lk = after
	holds, waits := after.holder == in.sess, after.waits(in.sess)
	delayed := after.delayed && after.delayBy == in.sess
	oHold, oWait := in.othersHold(after), in.othersWait(after)
	if !in.r.keep(func(s *State) bool {
		f := &s.F
		return (f.Tok[cS] != 0) == holds && f.queued(cS) == waits && f.Delayed == delayed &&
			(f.Tok[cO] != 0) == oHold && f.queued(cO) == oWait
	}) {
		in.fail(rc.at, what, "the run's lock after it: %s; the model's: %s", after, in.modelLock())
		return
	}
	if delayed {
		in.delayTk = after.delayTk
	} else {
		in.delayTk = 0
	}
}

// modelLock describes the model's lock (its first state).
func (in *sessionReplay) modelLock() string {
	s := in.r.first()
	f := &s.F
	out := "free"
	switch {
	case f.Tok[cS] != 0:
		out = "held by the session"
	case f.Tok[cO] != 0:
		out = "held by others"
	}
	if f.Delayed {
		out += ", in the session's lock-delay"
	}
	if f.queued(cS) {
		out += ", the session waits"
	}
	if f.queued(cO) {
		out += ", others wait"
	}
	return out
}
