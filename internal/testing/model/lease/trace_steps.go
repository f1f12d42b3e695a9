package lease

// The steps a replay of a run takes that the exhaustive checker's actions
// do not (Bounds.Trace): in a run, the log's order is given, so entries
// are proposed and committed where the run's log has them; a leader's
// decision to expire a session or end a lock-delay is checked when the run
// makes it, while its entry takes its place in the log; and a new leader
// times a session from its own apply of the entry that anchors it, which
// may follow the entry's commit (the model commits an entry on every
// replica at once).

// traceInitial is a replay's first state: no leader yet, client 0 (the
// session the replay follows) without a session, the others immortal and
// open.
func (m *model) traceInitial() State {
	var s State
	for c, k := range m.cfg.Clients {
		cl := &s.C[c]
		cl.Kind = uint8(k)
		if k == Immortal {
			cl.Phase = cOpen
			s.F.Alive[c], s.F.Renewed[c] = true, true
		}
	}
	return s
}

// commitEntry commits e at its place in the log: the head of the leader's
// uncommitted entries when proposed is set (it was, before a leader
// change it survived), else proposed and committed at once (nothing the
// leader holds uncommitted comes before it in the log).
func (st *step) commitEntry(e entry, proposed bool) bool {
	l := &st.s.L
	if l.Phase == phaseNone {
		return false
	}
	if proposed {
		if l.NPend == 0 || l.Pend[0].Kind != e.Kind || l.Pend[0].C != e.C {
			return false
		}
		return st.apply(Action{Kind: aCommit})
	}
	st.applyEntry(e)
	return true
}

// observedDeadline sets client c's deadline at the leader to dl ticks from
// now, which the run's leader set from its own apply of the entry the
// deadline counts from: no earlier than the model's (counted from that
// entry's commit), no later than a full span from now.
func (st *step) observedDeadline(c, dl, span int) bool {
	l := &st.s.L
	if !l.Known[c] || dl < int(l.DL[c]) || dl > span {
		return false
	}
	l.DL[c] = uint8(dl)
	l.Edge[c] = dl == 0
	return true
}

// installObserved installs a new leader's takeover with the deadlines the
// run's leader gave (dl[c] < 0: it has none for c): each one no earlier
// than the model's install would give, no later than the whole grace (a
// session opened during the takeover: TTL) from now.
func (st *step) installObserved(dl []int) bool {
	s, m := &st.s, st.m
	l := &s.L
	if l.Phase != phaseRead {
		return false
	}
	probe := *st
	probe.install()
	for c := 0; c < m.n; c++ {
		known := l.Known[c]
		if known != (dl[c] >= 0) {
			return false
		}
		if !known {
			continue
		}
		span := m.grace[ri(l.Fast)]
		if l.Replayed[c] {
			span = m.ttl[ri(l.Fast)]
		}
		if dl[c] < int(probe.s.L.DL[c]) || dl[c] > span {
			return false
		}
		probe.s.L.DL[c] = uint8(dl[c])
		probe.s.L.Edge[c] = dl[c] == 0
	}
	*st = probe
	return true
}

// markExpiring is the leader's decision to expire client c's session
// (ExpireSessions proposed): allowed once its deadline has come. A
// repeated proposal (the first did not commit) changes nothing.
func (st *step) markExpiring(c int) bool {
	s := &st.s
	l := &s.L
	if l.Phase != phaseLeading || !l.Known[c] || !s.F.Alive[c] {
		return false
	}
	if l.Expiring[c] {
		return true
	}
	if l.DL[c] != 0 {
		return false
	}
	l.Expiring[c] = true
	return true
}

// endDue is the leader's decision to end the lock's delay (EndDelay
// proposed): allowed once its time is up. A repeated proposal changes
// nothing.
func (st *step) endDue() bool {
	s := &st.s
	if s.L.Phase != phaseLeading || !s.F.Delayed {
		return false
	}
	if !s.L.DelayArmed {
		return true // proposed before (a retry)
	}
	if !st.delayDue() {
		return false
	}
	s.L.DelayArmed = false
	return true
}

// forget ends client c's acquisition that never reached the cluster (its
// proposal failed before it was sent: the client knows it never executes).
func (st *step) forget(c int) bool {
	cl := &st.s.C[c]
	if cl.AcqSeq == 0 || st.s.F.Owner[c] == cl.AcqSeq {
		return false
	}
	cl.AcqSeq = 0
	return true
}

// takeCommand returns the entry client c's decision made (cl.Cmd) and
// clears it: in a replay the run's log places it.
func (st *step) takeCommand(c int) entry {
	cl := &st.s.C[c]
	e := cl.commandEntry(c)
	cl.Cmd, cl.CmdArg, cl.CmdAck = cmdNone, 0, 0
	return e
}

// othersLeave: the other sessions on the lock (client c stands for them)
// let go of it — their hold ends (a lock-delay one of them left counts as
// part of their hold), or their wait — where the run's lock no longer has
// them so (hold, wait: whether it still does).
func (st *step) othersLeave(c int, hold, wait bool) bool {
	s := &st.s
	f, cl := &s.F, &s.C[c]
	switch {
	case f.Tok[c] != 0 && !hold:
	case f.queued(c) && !hold && !wait:
	default:
		return true
	}
	owner := f.Owner[c]
	cl.Win, cl.Gone, cl.AcqSeq = winNone, owner, 0
	st.applyEntry(entry{Kind: eRelease, C: uint8(c), Arg: owner})
	return true
}

// othersJoin: the other sessions take the lock, or wait for it, where the
// run's lock has them so and the model's does not yet.
func (st *step) othersJoin(c int, hold, wait bool) bool {
	f, cl := &st.s.F, &st.s.C[c]
	if f.Tok[c] != 0 || f.queued(c) || !hold && !wait {
		return true
	}
	cl.Seq++
	cl.AcqSeq = cl.Seq
	st.applyEntry(entry{Kind: eAcquire, C: uint8(c), Arg: cl.Seq})
	return true
}

// readBarrier is a new leader's barrier that is not a takeover marker (a
// Tick: the barrier below cluster version 4): the leader reads the
// sessions; nobody is marked.
func (st *step) readBarrier() bool {
	s, m := &st.s, st.m
	l := &s.L
	if l.Phase != phaseElected {
		return false
	}
	l.Phase, l.ReadAge = phaseRead, 0
	for d := 0; d < m.n; d++ {
		l.Known[d] = s.F.Alive[d] && s.C[d].Kind != kindImmortal
		l.Replayed[d], l.Expiring[d], l.DL[d] = false, false, 0
	}
	return true
}

// resend: the attempt to renew with keepalive i of client c failed (no
// leader, a leadership round or a Renewed entry that failed) and the
// client's node sends it again within the same attempt (node.KeepAlive's
// retries): it is in flight again, with its client's send time.
func (st *step) resend(c, i int) bool {
	k := &st.s.C[c].KA[i]
	switch k.Stage {
	case kaToLeader, kaConfirm, kaConfirmOld, kaRenew, kaRenewOld:
		k.Stage, k.Since, k.Term = kaToLeader, 0, 0
		return true
	}
	return false
}

// abandon: client c gives up its session while its window is still open —
// its node closed, or it abandoned it (Session.Abandon), or it learnt that
// the cluster ended it — and ends it as a lapse does (Session.lose): its
// window ends now, and what it sends next is the lapsed form.
func (st *step) abandon(c int) bool {
	cl := &st.s.C[c]
	if cl.Kind == kindImmortal {
		return false
	}
	if cl.Phase != cOpen {
		return true // lost, closed, or not yet open: nothing to end
	}
	cl.Phase, cl.V = cLost, 0
	st.windowLapsed(c)
	return true
}

// ghostAge is the age of a keepalive whose answer can no longer reach its
// client (ghost): a copy the network delivered again, or one whose
// client's attempt ended. It does not age (tick), and no client's answer
// is ever one of its (a client's attempt is never that old).
const ghostAge = 200

// ghost makes keepalive i of client c a ghost.
func (st *step) ghost(c, i int) {
	k := &st.s.C[c].KA[i]
	switch k.Stage {
	case kaFree:
	case kaReply, kaRefused:
		*k = ka{} // an answer nobody waits for
	default:
		k.Age = ghostAge
	}
}

// duplicate: the network delivers a copy of one of client c's keepalives
// again (a ghost in a free slot, on its way to the leader); it returns the
// slot (-1: none free).
func (st *step) duplicate(c int) int {
	for i := range st.s.C[c].KA {
		if k := &st.s.C[c].KA[i]; k.Stage == kaFree {
			*k = ka{Stage: kaToLeader, Age: ghostAge}
			return i
		}
	}
	return -1
}

// dropGhost loses one of client c's ghosts (the network may lose a copy)
// and returns its slot (-1: it has none).
func (st *step) dropGhost(c int) int {
	for i := range st.s.C[c].KA {
		if k := &st.s.C[c].KA[i]; k.Stage != kaFree && k.Age == ghostAge {
			*k = ka{}
			return i
		}
	}
	return -1
}

// dropGhostAnswer drops keepalive i of client c if it is a ghost whose
// answer is ready: nobody receives it.
func (st *step) dropGhostAnswer(c, i int) {
	if k := &st.s.C[c].KA[i]; k.Age == ghostAge && (k.Stage == kaReply || k.Stage == kaRefused) {
		*k = ka{}
	}
}
