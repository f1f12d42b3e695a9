package lease

// clientAction performs a client's (or an operator's) decision.
func (st *step) clientAction(kind uint8, c int) bool {
	s, m := &st.s, st.m
	cl := &s.C[c]
	f := &s.F
	switch kind {
	case aOpen:
		if cl.Phase != cIdle {
			return false
		}
		cl.Phase, cl.Cmd, cl.CmdAge = cOpening, cmdOpen, 0
		return true
	case aAcquire:
		if cl.Phase != cOpen || cl.Cmd != cmdNone || cl.AcqSeq != 0 || cl.Releasing != 0 || f.Owner[c] != 0 || int(cl.Acqs) >= m.b.Acquires && !m.b.Trace {
			return false
		}
		cl.Seq++
		cl.AcqSeq, cl.Cmd, cl.CmdArg, cl.CmdAck = cl.Seq, cmdAcquire, cl.Seq, cl.Ack
		cl.Acqs++
		return true
	case aUnlock:
		if cl.Win != winOpen || cl.Cmd != cmdNone || cl.AcqSeq == 0 || m.b.Passive {
			return false
		}
		cl.Win = winNone
		st.giveUp(c, cmdRelease)
		return true
	case aWithdraw:
		// A wait (or an acquisition whose result the client does not know)
		// that the client gives up: Lock's context ended.
		if cl.Phase != cOpen || cl.Cmd != cmdNone || cl.AcqSeq == 0 || f.Tok[c] != 0 && f.Owner[c] == cl.AcqSeq || m.b.Passive {
			return false
		}
		st.giveUp(c, cmdRelease)
		return true
	case aClose:
		if cl.Phase != cOpen || cl.Cmd != cmdNone || m.b.NoClose {
			return false
		}
		cl.Phase, cl.Win = cClosed, winNone
		if cl.AcqSeq != 0 {
			cl.Gone, cl.AcqSeq = cl.AcqSeq, 0
		}
		cl.Cmd = cmdClose
		return true
	case aLoseClose:
		if cl.Phase != cLost || cl.Cmd != cmdNone || m.b.NoLoseClose {
			return false
		}
		cl.Phase = cClosed
		cl.Cmd = cmdCloseLapsed
		return true
	case aUnlockLost:
		if cl.Phase != cLost && cl.Phase != cClosed || cl.Cmd != cmdNone || cl.AcqSeq == 0 || m.b.NoLapsedRelease {
			return false
		}
		st.giveUp(c, cmdReleaseLapsed)
		return true
	case aAsk:
		if cl.Kind != kindKeeper || cl.Keep == 0 || cl.Phase != cOpen {
			return false
		}
		cl.Keep = uint8(m.p.TTL)
		return true
	case aKeeperRelease:
		if cl.Kind != kindKeeper || cl.Keep != 0 || cl.Cmd != cmdNone || cl.AcqSeq == 0 || cl.Phase != cOpen {
			return false
		}
		st.giveUp(c, cmdReleaseLapsed)
		return true
	case aDeliver:
		return st.deliver(c, false, 0)
	case aRevoke:
		if int(s.M.Revokes) >= m.b.Revokes || f.Tok[c] == 0 {
			return false
		}
		s.M.Revokes++
		return st.propose(entry{Kind: eRevoke, Arg: f.Tok[c]})
	case aEndSession:
		if int(s.M.Ends) >= m.b.Ends || !f.Alive[c] {
			return false
		}
		s.M.Ends++
		return st.propose(entry{Kind: eEndSession, C: uint8(c)})
	}
	return false
}

// giveUp ends the client's acquisition on the client and queues the
// release (cmd) that tells the cluster.
func (st *step) giveUp(c int, cmd uint8) {
	cl := &st.s.C[c]
	cl.Gone, cl.Releasing = cl.AcqSeq, cl.AcqSeq
	cl.Ack = cl.AcqSeq + 1 // the acquisition's call returned: acknowledged
	cl.Cmd, cl.CmdArg, cl.CmdAck = cmd, cl.AcqSeq, cl.Ack
	cl.AcqSeq = 0
}

// deliver hands client c's command to the leader (dup: a duplicate of its
// last request, delivered again by the network or a retried forward).
func (st *step) deliver(c int, dup bool, seq uint8) bool {
	s, m := &st.s, st.m
	cl := &s.C[c]
	if dup {
		if int(cl.Dups) >= m.b.Dups || seq == 0 || seq > cl.Seq {
			return false
		}
		cl.Dups++
		return st.propose(entry{Kind: eAcquire, C: uint8(c), Arg: seq})
	}
	if cl.Cmd == cmdNone {
		return false
	}
	e := cl.commandEntry(c)
	if !st.propose(e) {
		return false
	}
	cl.Cmd, cl.CmdArg, cl.CmdAck = cmdNone, 0, 0
	return true
}

// commandEntry is the log entry of client c's pending command (cl.Cmd,
// not cmdNone).
func (cl *client) commandEntry(c int) entry {
	var e entry
	switch cl.Cmd {
	case cmdOpen:
		e = entry{Kind: eOpen, C: uint8(c)}
	case cmdAcquire:
		e = entry{Kind: eAcquire, C: uint8(c), Arg: cl.CmdArg, Ack: cl.CmdAck}
	case cmdRelease, cmdReleaseLapsed:
		e = entry{Kind: eRelease, C: uint8(c), Arg: cl.CmdArg, Ack: cl.CmdAck}
		if cl.Cmd == cmdReleaseLapsed {
			e.Arg2 = 1
		}
	case cmdClose, cmdCloseLapsed:
		e = entry{Kind: eClose, C: uint8(c)}
		if cl.Cmd == cmdCloseLapsed {
			e.Arg = 1
		}
	}
	return e
}
