package lease

// keepalive performs a keepalive step for slot i of client c.
func (st *step) keepalive(kind uint8, c, i int) bool {
	s, m := &st.s, st.m
	cl := &s.C[c]
	k := &cl.KA[i]
	l := &s.L
	switch kind {
	case aArrive, aArriveEdge:
		if k.Stage != kaToLeader {
			return false
		}
		if kind == aArriveEdge && (!m.b.Edges || l.Phase != phaseLeading || !l.Edge[c] || l.DL[c] != 0) {
			return false
		}
		if l.Phase != phaseLeading {
			*k = ka{} // not the leader (or not yet taken over): the attempt fails, the client retries
			return true
		}
		deadlinePassed := l.DL[c] == 0 && kind != aArriveEdge
		if !s.F.Alive[c] || !l.Known[c] || l.Expiring[c] || deadlinePassed {
			k.Stage = kaRefused
			return true
		}
		cl.Silent = 0
		k.Since = 0
		if m.v.RenewPerTerm && !s.F.Renewed[c] && !m.v.AckBeforeRenewed {
			k.Stage, k.Term = kaRenew, l.Changes
			if m.b.Trace {
				return true // the replay proposes the Renewed entry where the run's log has it
			}
			if !l.Renewing[c] {
				if !st.propose(entry{Kind: eRenewed, C: uint8(c), Arg: l.Changes}) {
					return false
				}
				l.Renewing[c] = true
			}
			return true
		}
		k.Stage = kaConfirm
		return true
	case aRefuseOld:
		if !m.b.DeposedRefusals || l.Changes == 0 {
			return false
		}
		if k.Stage != kaToLeader && k.Stage != kaConfirmOld && k.Stage != kaRenewOld {
			return false
		}
		k.Stage = kaRefused
		return true
	case aArriveOld:
		if k.Stage != kaToLeader || l.Stale == 0 || !s.F.Alive[c] {
			return false
		}
		cl.Silent = 0
		k.Stage = kaReply
		return true
	case aConfirm:
		// A keepalive waiting for its Renewed entry (kaRenew, kaRenewOld)
		// is confirmed only once that entry commits (machine: eRenewed).
		if m.v.RenewedInState && s.F.Renewed[c] {
			switch k.Stage {
			case kaRenew:
				k.Stage = kaConfirm
			case kaRenewOld:
				k.Stage = kaConfirmOld
			}
		}
		switch k.Stage {
		case kaConfirmOld:
			k.Stage = kaReply
			return true
		case kaConfirm:
			if l.Phase != phaseLeading {
				return false
			}
			if !s.F.Alive[c] || !l.Known[c] || (l.Expiring[c]) {
				k.Stage = kaRefused
				return true
			}
			if d := m.ttl[ri(l.Fast)] - int(k.Since); d > int(l.DL[c]) {
				l.DL[c] = uint8(d)
			}
			k.Stage = kaReply
			return true
		}
		return false
	case aReply:
		switch k.Stage {
		case kaReply:
			if cl.Phase == cOpen {
				if v := m.w - int(k.Age); v > int(cl.V) {
					cl.V = uint8(v)
				}
			}
		case kaRefused:
			if cl.Phase == cOpen {
				cl.Phase = cLost
				cl.V = 0
				st.windowLapsed(c)
			}
		default:
			return false
		}
		*k = ka{}
		return true
	case aDrop:
		if k.Stage == kaFree {
			return false
		}
		*k = ka{}
		return true
	}
	return false
}
