package lease

// Leader changes: a leader deposed, a takeover installed, a cluster rebuilt.

// depose ends the leader's leadership; the first keep of its uncommitted
// entries survive in the next leader's log (Raft may keep any prefix).
func (st *step) depose(keep int) bool {
	s, m := &st.s, st.m
	l := &s.L
	if l.Phase == phaseNone || keep > int(l.NPend) || keep >= maxPending {
		return false
	}
	if m.b.Timely && l.Phase == phaseLeading && int(l.Led) < m.p.MinLead {
		return false
	}
	for i := keep; i < int(l.NPend); i++ {
		// A client's command that did not survive fails: the client
		// proposes it again (an open, an acquisition it still wants, a
		// release until it commits, a close), unless it has moved on.
		e := l.Pend[i]
		cl := &s.C[e.C]
		arg, ack := e.Arg, e.Ack
		retry := cmdNone
		switch e.Kind {
		case eOpen:
			retry = cmdOpen
		case eAcquire:
			if cl.AcqSeq == e.Arg {
				retry = cmdAcquire
			}
		case eRelease:
			retry = cmdRelease
			if e.Arg2 == 1 {
				retry = cmdReleaseLapsed
			}
		case eClose:
			retry = cmdClose
			if e.Arg == 1 {
				retry = cmdCloseLapsed
			}
		case eRestore:
			s.M.Restored = false
		}
		if retry != cmdNone && cl.Cmd == cmdNone && !m.b.Trace { // a replay delivers the run's retries itself
			cl.Cmd, cl.CmdArg, cl.CmdAck = retry, arg, ack
		}
		l.Pend[i] = entry{}
	}
	kept := func(c int, term uint8) bool {
		for i := 0; i < keep; i++ {
			if e := l.Pend[i]; e.Kind == eRenewed && int(e.C) == c && e.Arg == term {
				return true
			}
		}
		return false
	}
	for c := 0; c < m.n; c++ {
		for i := range s.C[c].KA {
			k := &s.C[c].KA[i]
			switch k.Stage {
			case kaConfirm:
				k.Stage = kaConfirmOld
			case kaRenew, kaRenewOld:
				if kept(c, k.Term) || m.v.RenewedInState {
					k.Stage = kaRenewOld
				} else {
					*k = ka{} // its Renewed entry is lost: the deposed leader never acknowledges it
				}
			}
		}
	}
	wasLeading := l.Phase == phaseLeading
	nl := leader{Changes: l.Changes + 1, Pend: l.Pend, NPend: uint8(keep), Idle: l.Idle}
	if wasLeading {
		nl.Idle = 0
		if m.p.StaleAck > 0 {
			nl.Stale = uint8(m.p.StaleAck + 1) // arrivals at the election's tick and StaleAck ticks after it
		}
	} else {
		nl.Stale = l.Stale
	}
	*l = nl
	return true
}

// install ends the takeover (expiryManager.takeOver): every session read
// at the barrier gets its deadline, the sessions opened since are
// replayed, and every pending lock-delay is timed.
func (st *step) install() {
	s, m := &st.s, st.m
	l := &s.L
	r := ri(l.Fast)
	for c := 0; c < m.n; c++ {
		if !l.Known[c] {
			continue
		}
		var dl int
		switch {
		case l.Replayed[c] && m.v.ReplayTime:
			dl = m.ttl[r] // the time is taken when the session is replayed
		case l.Replayed[c]:
			dl = m.ttl[r] - int(l.ReadAge) // replayed with the time read before
		case m.v.RenewPerTerm && !s.F.Renewed[c]:
			dl = m.grace[r] - int(s.F.Origin[c]) // from this replica's apply of the session's origin marker
		default:
			dl = m.grace[r] - int(l.ReadAge) // the takeover grace from the read
		}
		l.DL[c] = uint8(max(dl, 0))
	}
	if s.F.Delayed {
		l.DelayArmed = true
		l.DelayT = uint8(m.ld[r])
		if m.v.DelayCredit {
			l.DelayT = uint8(max(m.ld[r]-int(s.F.DelayAge), 0))
		}
	}
	l.Phase, l.Idle, l.ReadAge = phaseLeading, 0, 0
	if m.b.Rebuild && m.v.NoRaise {
		s.M.Raised = s.M.Raised || s.M.Rebuilt // the exception's window ends here: no raise will come
	}
	if m.b.Rebuild && !m.v.NoRaise {
		// RaiseTokens: the counter rises to the leader's wall clock.
		st.propose(entry{Kind: eRaise, Arg: uint8(max(int(s.M.Now)*tokensPerTick+int(l.Wall), 0))})
	}
}

// rebuild replaces the cluster with one built from empty data dirs: no
// sessions, no locks, a grant counter of 0, and no leader yet (its first
// leader raises the counter at its takeover). The old cluster's holders
// learn nothing: their windows are the exception of an operator action.
func (st *step) rebuild() bool {
	s, m := &st.s, st.m
	if !m.b.Rebuild || s.M.Rebuilt {
		return false
	}
	s.M.Rebuilt, s.M.RebuildAt = true, s.M.Now
	s.F = machine{}
	for c := 0; c < m.n; c++ {
		st.exempt(c)
		cl := &s.C[c]
		cl.Phase, cl.AcqSeq, cl.Cmd, cl.Acqs, cl.Releasing, cl.Seq, cl.Ack = cIdle, 0, cmdNone, 0, 0, 0, 0
	}
	s.L = leader{Changes: s.L.Changes}
	return true
}
