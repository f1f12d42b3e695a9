package lease

import (
	"fmt"
	"slices"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/leasetrace"
	"github.com/raftlock/raftlock/internal/lockinfo"
)

// One replay: a session S of the run (client 0) and, if lock is set, S on
// that lock with every other session on it as client 1 (Conform).

const (
	cS = 0 // the session followed
	cO = 1 // the other sessions on the lock
)

// sessionReplay follows one session (and one lock) through the run.
type sessionReplay struct {
	c    *conformer
	sess lockinfo.SessionID
	lock string
	r    replay

	track []*lockState // the lock after each command that touched it
	lk    lockState    // the lock now

	// The model's leader: the run's leader of the highest term seen.
	leaderNode string
	leaderTerm uint64
	changes    map[uint64]uint8 // term → the model's leader.Changes
	// pend: the log positions of the model leader's uncommitted entries
	// (the entries that survived a deposition), in order.
	pend []int

	owners  map[lockinfo.OwnerID]uint8 // S's acquisitions of the lock → model request numbers
	decided map[uint64]entry           // S's request (its seq) → the entry S's decision made
	opened  *entry                     // S's OpenSession, decided
	delayTk lockinfo.Token             // the run's token of S's lock-delay on the lock (0: none)
	copies  int                        // copies of keepalives the network lost in the model, whose answers the run will show

	cmdDone int  // the position of the last command taken
	alive   bool // the run's session is alive (after the last command taken)
	existed bool // the run's session was opened

	mismatch *Mismatch
	stopped  string // why the replay stopped before its end ("" if it did not)
	started  bool
	done     bool
}

func (c *conformer) newReplay(s lockinfo.SessionID, lock string) (*sessionReplay, error) {
	delay := int(c.log.delay[s] / c.tick)
	p := Params{TTL: ticksPerTTL, Margin: ticksPerTTL / 20, Election: int(int64(c.cfg.ElectionTimeout) / c.tick), LockDelay: delay,
		MaxAge: 40, Commit: 1, Outage: 3, MinLead: 2}
	cfg := Config{Name: fmt.Sprintf("session %d %s", s, lock), Params: p, Variant: Fixed(), Clients: []ClientKind{Lease, Immortal},
		Bounds: Bounds{Trace: true, KA: maxKA}}
	m, err := newModel(cfg)
	if err != nil {
		return nil, err
	}
	in := &sessionReplay{c: c, sess: s, lock: lock, changes: map[uint64]uint8{}, owners: map[lockinfo.OwnerID]uint8{}, decided: map[uint64]entry{}, cmdDone: -1}
	in.r = replay{m: m, cands: []State{m.traceInitial()}}
	if lock != "" {
		in.track = c.log.lockTrack(lock)
	}
	return in, nil
}

// run replays the run's steps in order until the replay ends, stops or
// finds a mismatch.
func (in *sessionReplay) run() {
	c := in.c
	for i := range c.items {
		it := &c.items[i]
		if !in.started {
			in.r.tick = c.ticks(it.at)
			in.started = true
		}
		if !in.r.advance(c.ticks(it.at)) {
			in.fail(it.at, "time passes", "no state lets the tick pass")
			return
		}
		before := in.r.steps
		if it.ev != nil {
			in.event(it.ev, it.at)
		} else {
			in.command(it.cmd)
		}
		if c.debug != nil && (in.r.steps != before || in.mismatch != nil) {
			c.debug(in.sess, in.lock, fmt.Sprintf("t=%d %s →%s", in.r.tick, c.itemText(it), in.r.describe()))
		}
		if in.mismatch != nil || in.stopped != "" {
			return
		}
		if in.finished() {
			in.done = true
			return
		}
	}
}

// fail records a mismatch and stops the replay.
func (in *sessionReplay) fail(at int64, step, format string, args ...any) {
	detail := fmt.Sprintf(format, args...)
	if v := in.r.viol; v != nil {
		detail += fmt.Sprintf(" — the model allows it only by breaking %v", v)
	}
	detail += "; model states before it:" + in.r.describe()
	in.mismatch = &Mismatch{Session: uint64(in.sess), Lock: in.lock, At: at, Tick: in.c.ticks(at - in.c.start), Step: step, Detail: detail}
}

// outOfScope stops the replay: the run does something the model does not
// describe.
func (in *sessionReplay) outOfScope(why string) { in.stopped = why }

// step counts a step of the run the model took.
func (in *sessionReplay) step(ok bool) bool {
	if ok {
		in.r.steps++
	}
	return ok
}

// ---- trace events ----

func (in *sessionReplay) event(e *leasetrace.Event, at int64) {
	switch e.Kind {
	case leasetrace.Lead:
		if e.Term > in.leaderTerm {
			in.newLeader(e.Term, at)
		}
		if e.Term == in.leaderTerm {
			in.leaderNode = e.Node
		}
		return
	case leasetrace.Install:
		in.install(e, at)
		return
	}
	// The rest concern one session.
	mine := lockinfo.SessionID(e.Session) == in.sess || slices.Contains(e.Sessions, uint64(in.sess))
	if !mine && !(e.Kind == leasetrace.ProposeEndDelay && e.Lock == in.lock && in.lock != "") {
		return
	}
	switch e.Kind {
	case leasetrace.KeepAliveReceived:
		in.received(e, at)
	case leasetrace.KeepAliveAnswered:
		in.answered(e, at)
	case leasetrace.DeadlineSet:
		if e.Node == in.leaderNode {
			dl := int(in.c.ticks(e.Deadline) - in.c.ticks(at))
			if !in.step(in.r.with(func(st *step) bool { return st.observedDeadline(cS, max(dl, 0), ticksPerTTL) })) {
				in.fail(at, "the leader sets the deadline of the session it saw opened", "deadline in %d ticks", dl)
			}
		}
	case leasetrace.ProposeExpire:
		if e.Node == in.leaderNode {
			if !in.step(in.r.with(func(st *step) bool { return st.markExpiring(cS) })) {
				in.fail(at, "the leader proposes the session's expiry", "its deadline has not come (or it does not know the session)")
			}
		}
	case leasetrace.ProposeEndDelay:
		if e.Node == in.leaderNode && in.delayTk != 0 && lockinfo.Token(e.Token) == in.delayTk {
			if !in.step(in.r.with(func(st *step) bool { return st.endDue() })) {
				in.fail(at, "the leader proposes the end of the session's lock-delay", "its time is not up")
			}
		}
	case leasetrace.Opened:
		in.openDecided(at)
	case leasetrace.KeepAliveSent:
		in.sent(at)
	case leasetrace.KeepAliveResult:
		in.result(e, at)
	case leasetrace.Lost:
		in.lost(e, at)
	case leasetrace.Command:
		in.clientCommand(e, at)
	}
}

// newLeader deposes the model's leader (its entries that the run's log
// commits later survive) and elects the leader of term.
func (in *sessionReplay) newLeader(term uint64, at int64) {
	var surv []int
	var ents []entry
	for k := in.nextCmd(); k < len(in.c.log.cmds); k++ {
		rc := &in.c.log.cmds[k]
		if rc.term > in.leaderTerm {
			break
		}
		if slices.Contains(in.pend, k) {
			continue
		}
		if e, ok := in.modelEntry(k); ok {
			surv = append(surv, k)
			ents = append(ents, e)
		}
	}
	if len(in.pend)+len(surv) > maxPending-1 {
		in.outOfScope("more uncommitted entries survive a leader change than the model holds")
		return
	}
	ok := in.r.with(func(st *step) bool {
		if st.s.L.Phase == phaseNone {
			return len(ents) == 0
		}
		for _, e := range ents {
			if !st.propose(e) {
				return false
			}
		}
		return st.apply(Action{Kind: aDepose, Arg: st.s.L.NPend})
	})
	if !ok && in.r.first().L.Phase != phaseNone {
		in.fail(at, "a new leader is elected", "the previous leader's uncommitted entries cannot survive")
		return
	}
	if !ok { // no leader to depose, and entries to survive: impossible
		in.fail(at, "a new leader is elected", "entries of an earlier term survive without a leader")
		return
	}
	in.pend = append(in.pend, surv...)
	in.step(in.r.do(Action{Kind: aElect, Arg: 0, Arg2: wallBias}))
	in.leaderTerm, in.leaderNode = term, ""
	in.changes[term] = in.r.first().L.Changes
}

// nextCmd is the position of the first command the replay has not taken.
func (in *sessionReplay) nextCmd() int { return in.cmdDone + 1 }

// install: the run's leader installed its takeover.
func (in *sessionReplay) install(e *leasetrace.Event, at int64) {
	if e.Node != in.leaderNode {
		return
	}
	dl := []int{-1, -1}
	if i := slices.Index(e.Sessions, uint64(in.sess)); i >= 0 {
		dl[cS] = max(int(in.c.ticks(e.Deadlines[i])-in.c.ticks(at)), 0)
	}
	if in.r.first().L.Phase != phaseRead {
		in.fail(at, "the new leader installs its takeover", "its barrier has not been applied")
		return
	}
	if !in.step(in.r.with(func(st *step) bool { return st.installObserved(dl) })) {
		in.fail(at, "the new leader installs its takeover", "it gives the session a deadline in %d ticks (-1: none)", dl[cS])
	}
}

// finished reports whether nothing of the session is left to check: it
// ended in the run and in the model, its client's window is closed, and it
// left no lock-delay and no P3 window.
func (in *sessionReplay) finished() bool {
	if !in.existed || in.alive {
		return false
	}
	for i := range in.r.cands {
		s := &in.r.cands[i]
		if ph := s.C[cS].Phase; s.F.Alive[cS] || ph == cOpen || ph == cOpening || s.M.Guard > 0 || s.F.Delayed {
			return false
		}
	}
	return true
}

// ---- keepalives ----

// slots tries f on every keepalive slot of S in one of stages.
func (in *sessionReplay) slots(f func(st *step, i int) bool, stages ...uint8) bool {
	return in.r.next(func(st *step, emit func(*step)) {
		for i := range st.s.C[cS].KA {
			if !slices.Contains(stages, st.s.C[cS].KA[i].Stage) {
				continue
			}
			x := *st
			if f(&x, i) {
				x.dropGhostAnswer(cS, i)
				emit(&x)
			}
		}
	})
}

// arrivals tries f on every keepalive of S on its way to a leader, and on
// a copy of one the network delivers again (a ghost: the flow class
// replays requests).
func (in *sessionReplay) arrivals(f func(st *step, i int) bool) bool {
	dropped := false
	ok := in.r.next(func(st *step, emit func(*step)) {
		for i := range st.s.C[cS].KA {
			if st.s.C[cS].KA[i].Stage != kaToLeader {
				continue
			}
			x := *st
			if f(&x, i) {
				x.dropGhostAnswer(cS, i)
				emit(&x)
			}
		}
		x := *st
		i := x.duplicate(cS)
		if i < 0 {
			// Every slot is taken: the network may lose a copy as well —
			// one already on its way, whose answer then goes unmatched
			// (in.copies counts those).
			if i = x.dropGhost(cS); i < 0 {
				return
			}
			dropped = true
			x.duplicate(cS)
		}
		if f(&x, i) {
			x.dropGhostAnswer(cS, i)
			emit(&x)
		}
	})
	if ok && dropped {
		in.copies++
	}
	return ok
}

func (in *sessionReplay) received(e *leasetrace.Event, at int64) {
	act := func(kind uint8, want uint8) func(st *step, i int) bool {
		return func(st *step, i int) bool {
			return st.apply(Action{Kind: kind, C: cS, Arg: uint8(i)}) && (want == kaFree || st.s.C[cS].KA[i].Stage == want)
		}
	}
	var ok bool
	what := "a keepalive reaches the leader: " + e.Verdict
	if e.Node != in.leaderNode {
		what = "a keepalive reaches a node that does not lead: " + e.Verdict
		switch e.Verdict {
		case leasetrace.VerdictRefused:
			ok = in.arrivals(act(aRefuseOld, kaRefused))
		default: // it fails (no answer, or not the leader): the node may send it again
			ok = in.arrivals(func(st *step, i int) bool { return true })
		}
	} else {
		switch e.Verdict {
		case leasetrace.VerdictRefused:
			ok = in.arrivals(act(aArrive, kaRefused))
		case leasetrace.VerdictNotLeader, leasetrace.VerdictFailed:
			ok = in.arrivals(func(st *step, i int) bool { return true })
		case leasetrace.VerdictConfirm, leasetrace.VerdictRenew:
			// A leader that did not learn that its Renewed entry for the
			// session committed (the proposal failed on its side) still
			// treats the session as marked: it waits for another Renewed
			// entry where the model asks only for a leadership round.
			// That entry's commit after the arrival is at least a round's
			// evidence, so the model's round (kaConfirm) stands for it.
			renewRound := e.Verdict == leasetrace.VerdictRenew
			want := uint8(kaConfirm)
			if renewRound {
				want = kaRenew
			}
			arrive := func(kind uint8) func(st *step, i int) bool {
				return func(st *step, i int) bool {
					if !st.apply(Action{Kind: kind, C: cS, Arg: uint8(i)}) {
						return false
					}
					got := st.s.C[cS].KA[i].Stage
					return got == want || renewRound && got == kaConfirm && st.s.F.Renewed[cS]
				}
			}
			ok = in.arrivals(func(st *step, i int) bool {
				x := *st
				if arrive(aArrive)(&x, i) {
					*st = x
					return true
				}
				return arrive(aArriveEdge)(st, i)
			})
		}
	}
	if !in.step(ok) {
		in.fail(at, what, "no keepalive of the session in flight that the model lets the leader treat so")
	}
}

func (in *sessionReplay) answered(e *leasetrace.Event, at int64) {
	since := in.c.ticks(at) - in.c.ticks(e.Sent)
	bySince := func(st *step, i int) bool {
		k := st.s.C[cS].KA[i]
		return int64(k.Since) == min(since, int64(ticksPerTTL))
	}
	var ok bool
	what := "the leader answers a keepalive: " + e.Verdict
	switch e.Verdict {
	case "":
		what = "the leader acknowledges a keepalive"
		dl := in.c.ticks(e.Deadline) - in.c.ticks(at)
		ok = in.slots(func(st *step, i int) bool {
			old := st.s.C[cS].KA[i].Stage == kaConfirmOld || st.s.C[cS].KA[i].Stage == kaRenewOld
			if !old && (!bySince(st, i) || e.Node != in.leaderNode) {
				return false
			}
			if !st.apply(Action{Kind: aConfirm, C: cS, Arg: uint8(i)}) || st.s.C[cS].KA[i].Stage != kaReply {
				return false
			}
			return old || int64(st.s.L.DL[cS]) == max(dl, 0)
		}, kaConfirm, kaConfirmOld, kaRenewOld, kaRenew)
		if !ok && in.copies > 0 {
			in.copies-- // the answer to a copy the model let the network lose (arrivals)
			return
		}
		if !ok {
			in.fail(at, what, "the model has no keepalive the leader may acknowledge now with a deadline in %d ticks (one waiting for its Renewed entry may not be)", dl)
			return
		}
	case leasetrace.VerdictRefused:
		ok = in.slots(func(st *step, i int) bool {
			if e.Node != in.leaderNode {
				return st.apply(Action{Kind: aRefuseOld, C: cS, Arg: uint8(i)})
			}
			return bySince(st, i) && st.apply(Action{Kind: aConfirm, C: cS, Arg: uint8(i)}) && st.s.C[cS].KA[i].Stage == kaRefused
		}, kaConfirm, kaConfirmOld, kaRenew, kaRenewOld)
	default: // not-leader, failed: the attempt fails; the node may send it again
		ok = in.slots(func(st *step, i int) bool { return st.resend(cS, i) }, kaConfirm, kaConfirmOld, kaRenew, kaRenewOld, kaToLeader)
	}
	if !ok && in.copies > 0 {
		// The answer to a copy the model let the network lose (arrivals).
		in.copies--
		return
	}
	if !in.step(ok) {
		in.fail(at, what, "no keepalive of the session at the leader that the model lets it answer so")
	}
}

func (in *sessionReplay) sent(at int64) {
	ok := in.r.next(func(st *step, emit func(*step)) {
		x := *st
		if x.apply(Action{Kind: aSendKA, C: cS}) {
			emit(&x)
			return
		}
		// No free slot: an earlier attempt's message (or its answer) is
		// lost — the client gave up on it.
		for i := range st.s.C[cS].KA {
			y := *st
			if y.apply(Action{Kind: aDrop, C: cS, Arg: uint8(i)}) && y.apply(Action{Kind: aSendKA, C: cS}) {
				emit(&y)
			}
		}
	})
	if !in.step(ok) {
		in.fail(at, "the client sends a keepalive", "the model's client is not open (its window ended)")
	}
}

func (in *sessionReplay) result(e *leasetrace.Event, at int64) {
	age := in.c.ticks(at) - in.c.ticks(e.Sent)
	switch e.Verdict {
	case "":
		v := in.c.ticks(e.Deadline) - in.c.ticks(at)
		ok := in.slots(func(st *step, i int) bool {
			if int64(st.s.C[cS].KA[i].Age) != age || !st.apply(Action{Kind: aReply, C: cS, Arg: uint8(i)}) {
				return false
			}
			cl := &st.s.C[cS]
			return cl.Phase != cOpen || int64(cl.V) == max(v, 0)
		}, kaReply)
		if !in.step(ok) {
			in.fail(at, "the client's keepalive succeeds", "no acknowledged keepalive of the model sent %d ticks ago gives a window of %d ticks", age, v)
		}
	case leasetrace.VerdictRefused:
		ok := in.slots(func(st *step, i int) bool {
			return int64(st.s.C[cS].KA[i].Age) == age && st.apply(Action{Kind: aReply, C: cS, Arg: uint8(i)})
		}, kaRefused)
		if !in.step(ok) {
			in.fail(at, "the client's keepalive is refused", "no keepalive of the model sent %d ticks ago was refused", age)
		}
	}
	// The client's attempt is over: whatever else of its keepalives is on
	// its way, or answered, will never reach it.
	in.r.with(func(st *step) bool {
		for i := range st.s.C[cS].KA {
			st.ghost(cS, i)
		}
		return true
	})
}

func (in *sessionReplay) lost(e *leasetrace.Event, at int64) {
	switch e.Verdict {
	case leasetrace.LostDeadline:
		if !in.step(in.r.orLapse(cS, func(st *step) bool { return st.s.C[cS].Phase == cLost })) {
			in.fail(at, "the client's window ends", "the model's window is still open")
		}
	case leasetrace.LostRefused:
		if !in.r.keep(func(s *State) bool { return s.C[cS].Phase == cLost }) {
			in.fail(at, "the client is lost: a keepalive was refused", "the model's client is not lost")
		}
	default: // its node closed, it abandoned the session, or it learnt the cluster ended it
		in.step(in.r.with(func(st *step) bool { return st.abandon(cS) }))
	}
}

// ---- the client's decisions ----

func (in *sessionReplay) openDecided(at int64) {
	var e entry
	ok := in.r.with(func(st *step) bool {
		if !st.apply(Action{Kind: aOpen, C: cS}) {
			return false
		}
		e = st.takeCommand(cS)
		return true
	})
	if !in.step(ok) {
		in.fail(at, "the client opens the session", "the model's client already has one")
		return
	}
	in.opened = &e
}

func (in *sessionReplay) clientCommand(ev *leasetrace.Event, at int64) {
	ent, err := fsm.DecodeEntry(ev.Data)
	if err != nil || len(ent.Commands) != 1 {
		in.outOfScope("a client command the replay cannot read")
		return
	}
	if !in.r.first().F.Alive[cS] && in.r.first().C[cS].Phase != cOpening {
		return // the session ended: whatever it sends is a no-op
	}
	var seq uint64
	var e entry
	var ok bool
	var what string
	decide := func(kinds ...uint8) func(st *step) bool {
		return func(st *step) bool {
			for _, k := range kinds {
				x := *st
				if x.apply(Action{Kind: k, C: cS}) {
					*st = x
					e = st.takeCommand(cS)
					return true
				}
			}
			return false
		}
	}
	switch c := ent.Commands[0].(type) {
	case fsm.CloseSession:
		seq = c.Seq
		if c.Lapsed {
			what = "the lost client closes its session (Lapsed)"
			ok = in.r.orLapse(cS, decide(aLoseClose))
		} else {
			what = "the client closes its session"
			ok = in.r.with(decide(aClose))
		}
	case fsm.Acquire:
		if c.Lock != in.lock {
			return
		}
		seq = c.Seq
		what = "the client asks for the lock"
		if cl := &in.r.first().C[cS]; cl.AcqSeq != 0 && !in.executes(cl.AcqSeq) {
			in.r.with(func(st *step) bool { return st.forget(cS) })
		}
		ok = in.r.with(func(st *step) bool {
			if !decide(aAcquire)(st) {
				return false
			}
			if !c.Wait {
				e.Arg2 = 1
			}
			return true
		})
		if !ok {
			in.outOfScope("two acquisitions of one lock by one session at once")
			return
		}
		in.owners[c.Owner] = e.Arg
	case fsm.Release:
		if c.Lock != in.lock {
			return
		}
		seq = c.Seq
		own, known := in.owners[c.Owner]
		if !known {
			in.outOfScope("a release of an acquisition the replay does not know")
			return
		}
		what = "the client releases the lock"
		if in.r.first().C[cS].AcqSeq != own {
			// A release of an acquisition it gave up before (sent again,
			// or once it was granted): the log decides.
			e, ok = entry{Kind: eRelease, C: cS, Arg: own}, true
			if c.Lapsed {
				e.Arg2 = 1
			}
			break
		}
		if c.Lapsed {
			what = "the lost client releases the lock (Lapsed)"
			ok = in.r.orLapse(cS, decide(aUnlockLost))
		} else {
			ok = in.r.with(decide(aUnlock, aWithdraw))
		}
	default:
		return
	}
	if !in.step(ok) {
		in.fail(at, what, "the model's client may not do that now")
		return
	}
	in.decided[seq] = e
}

// executes reports whether S's acquisition with model request number seq
// ever executes in the run's log.
func (in *sessionReplay) executes(seq uint8) bool {
	for o, s := range in.owners {
		if s != seq {
			continue
		}
		for k := range in.c.log.cmds {
			rc := &in.c.log.cmds[k]
			if a, ok := rc.cmd.(fsm.Acquire); ok && a.Session == in.sess && a.Owner == o && !rc.dup {
				return true
			}
		}
	}
	return false
}
