package lease

// keepalive performs a keepalive step for slot i of client c.
func (st *step) keepalive(kind uint8, c, i int) bool {
	s, m := &st.s, st.m
	cl := &s.C[c]
	k := &cl.KA[i]
	l := &s.L
	switch kind {
	case aArrive:
		if k.Stage != kaToLeader {
			return false
		}
		if l.Phase != phaseLeading {
			*k = ka{} // not the leader (or not yet taken over): the attempt fails, the client retries
			return true
		}
		deadlinePassed := l.DL[c] == 0
		if !s.F.Alive[c] || !l.Known[c] || l.Expiring[c] || deadlinePassed {
			k.Stage = kaRefused
			return true
		}
		cl.Silent = 0
		k.Since = 0
		if m.v.RenewPerTerm && !s.F.Renewed[c] && !m.v.AckBeforeRenewed {
			k.Stage, k.Term = kaRenew, l.Changes
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
