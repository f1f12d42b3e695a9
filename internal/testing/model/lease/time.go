package lease

// Time: what must happen before a tick, and the tick itself.

// delayDue reports whether the leader must end the lock's delay now.
func (st *step) delayDue() bool {
	s := &st.s
	if s.L.Phase != phaseLeading || !s.F.Delayed || !s.L.DelayArmed {
		return false
	}
	if st.m.v.WallDelay {
		return int(s.F.DelayWall)-int(s.L.Wall) <= 0
	}
	return s.L.DelayT == 0
}

// urgent reports what must happen before time may pass in a Timely
// configuration ("" when nothing): a commit, a takeover.
func (st *step) urgent() string {
	s, m := &st.s, st.m
	l := &s.L
	if l.Phase != phaseNone && l.NPend > 0 && int(l.PendAge) >= m.p.Commit {
		return "an entry due to commit"
	}
	if l.Phase != phaseLeading && int(l.Idle) >= m.p.Outage {
		return "a leader due to take over"
	}
	return ""
}

// due reports what a leader does at once, in every configuration ("" when
// nothing): propose an expiry whose deadline has come, end a lock-delay
// whose time is up, install its deadlines after the takeover's read
// (unless Bounds.SlowTakeover). A leader that does these later only
// grants later — a state the prompt leader's schedules cover — so making
// them due loses no unsafe schedule and saves states.
func (st *step) due() string {
	s, m := &st.s, st.m
	if m.b.LateDuties {
		return ""
	}
	l := &s.L
	if l.Phase == phaseRead && !m.b.SlowTakeover {
		return "a takeover to install"
	}
	if l.Phase == phaseLeading {
		for c := 0; c < m.n; c++ {
			if l.Known[c] && l.DL[c] == 0 && !l.Expiring[c] && s.F.Alive[c] && l.NPend < maxPending {
				return "an expiry due to be proposed"
			}
		}
		if st.delayDue() && l.NPend < maxPending {
			return "an EndDelay due to be proposed"
		}
	}
	return ""
}

// tick advances real time by one tick.
func (st *step) tick() bool {
	s, m := &st.s, st.m
	if m.b.Timely && st.urgent() != "" {
		return false
	}
	if st.due() != "" {
		return false
	}
	if m.b.Edges {
		for c := 0; c < m.n; c++ {
			if cl := &s.C[c]; cl.Kind != kindImmortal && cl.Phase == cOpen && cl.V == 0 {
				return false // its window ends within this tick: it lapses first (aLapse)
			}
		}
	}
	if m.b.Rebuild {
		if int(s.M.Now) >= m.b.Horizon {
			return false
		}
		s.M.Now++
		s.M.Grants = 0
	}
	if s.M.Guard = dec(s.M.Guard); s.M.Guard == 0 {
		s.M.GuardBy = 0
	}
	l := &s.L
	if l.Phase != phaseLeading && m.b.Timely {
		l.Idle = satAdd(l.Idle, m.p.Outage+1)
	}
	if l.Phase == phaseLeading && m.b.Timely {
		l.Led = satAdd(l.Led, m.p.MinLead)
	}
	l.Stale = dec(l.Stale)
	if l.Phase == phaseRead && m.useReadAge {
		l.ReadAge = satAdd(l.ReadAge, m.capOrigin)
	}
	for c := 0; c < m.n; c++ {
		l.Edge[c] = false
		if l.Known[c] {
			l.Edge[c] = m.b.Edges && l.DL[c] == 1
			l.DL[c] = dec(l.DL[c])
		}
	}
	if l.DelayArmed {
		l.DelayT = dec(l.DelayT)
	}
	if l.NPend > 0 && l.Phase != phaseNone && m.b.Timely {
		l.PendAge = satAdd(l.PendAge, m.p.Commit)
	}
	f := &s.F
	if f.Delayed && m.v.DelayCredit {
		f.DelayAge = satAdd(f.DelayAge, m.p.LockDelay+1)
	}
	if f.Delayed && m.v.WallDelay && f.DelayWall > -int8(m.p.Wall)-1 {
		f.DelayWall--
	}
	for c := 0; c < m.n; c++ {
		cl := &s.C[c]
		if cl.Kind == kindImmortal {
			continue // nothing of an immortal session is timed
		}
		if f.Alive[c] && !f.Renewed[c] && m.v.RenewPerTerm {
			f.Origin[c] = satAdd(f.Origin[c], m.capOrigin)
		}
		if cl.Phase == cOpening {
			// Counted up to the window: an open committed then is lost.
			// With Edges one tick beyond: a window of 0 still ends within
			// its tick (machine.go's eOpen), one below 0 has ended.
			ageCap := m.w
			if m.b.Edges {
				ageCap++
			}
			cl.CmdAge = satAdd(cl.CmdAge, ageCap)
		}
		for i := range cl.KA {
			k := &cl.KA[i]
			if k.Stage == kaFree {
				continue
			}
			if k.Stage == kaConfirm || k.Stage == kaRenew {
				k.Since = satAdd(k.Since, m.p.TTL)
			}
			if k.Age == ghostAge {
				continue // a replay's ghost does not age (step.ghost)
			}
			k.Age++
			if int(k.Age) > m.p.MaxAge {
				*k = ka{}
			}
		}
		if f.Alive[c] && m.p4 > 0 {
			cl.Silent = satAdd(cl.Silent, m.p4+1)
		}
		if cl.Phase == cOpen {
			cl.V = dec(cl.V)
			if cl.V == 0 && !m.b.Edges { // with Edges it lapses within this tick (aLapse)
				cl.Phase = cLost
				st.windowLapsed(c)
			}
		}
		if cl.Kind == kindKeeper && cl.Keep > 0 {
			cl.Keep--
			if cl.Keep == 0 {
				st.windowLapsed(c)
			}
		}
		if cl.Win == winExempt && cl.V == 0 {
			cl.Win = winNone
		}
	}
	mon := &s.M
	if m.live > 0 && f.queueLen() > 0 && !st.headAdmitted() {
		mon.Wait = satAdd(mon.Wait, max(m.live, 1)+1)
	} else {
		mon.Wait = 0
	}
	if m.b.Timely {
		for c := 0; c < m.n; c++ {
			if f.Alive[c] && s.C[c].Kind != kindImmortal && int(s.C[c].Silent) > m.p4 {
				st.fail("P4", "session c%d has been silent for more than %d ticks and is not expired", c, m.p4)
			}
		}
		if int(mon.Wait) > m.live {
			st.fail("Live", "the lock has had a waiter and no holder for more than %d ticks", m.live)
		}
	}
	return true
}

// headAdmitted reports whether the lock's state keeps its first waiter out
// for a reason other than a delay or a missing grant: a live holder (or
// the permits of live holders).
func (st *step) headAdmitted() bool {
	f, m := &st.s.F, st.m
	if f.Orphan != 0 {
		return true // held by a restored session (an operator action)
	}
	if m.b.Limit == 0 {
		return f.holder(m.n) >= 0
	}
	head := int(f.Queue[0]) - 1
	return st.used()+int(f.Permits[head]) > m.b.Limit
}

// windowLapsed ends client c's window on the lock because its validity
// (or the HTTP client's window) ran out: from now on, for the lock-delay,
// nothing may be granted (P3).
func (st *step) windowLapsed(c int) {
	cl := &st.s.C[c]
	if cl.Win != winOpen {
		return
	}
	cl.Win = winNone
	if st.m.p.LockDelay > 0 && st.m.b.Limit == 0 {
		st.s.M.Guard = max(st.s.M.Guard, uint8(st.m.ldMin))
		st.s.M.GuardBy = uint8(c + 1)
	}
}
