package lease

import "fmt"

// Violation is a property that a step broke.
type Violation struct {
	Prop   string // "P1" … "P6", "Live"
	Detail string
}

func (v *Violation) Error() string { return v.Prop + ": " + v.Detail }

// model is a configuration's transition relation: successors lists every
// step from a state, pure and deterministic.
type model struct {
	cfg Config
	p   Params
	v   Variant
	b   Bounds
	n   int

	w           int    // the client's window: TTL − Margin (TTL with NoMargin)
	ttl, grace  [2]int // real ticks of TTL and the takeover grace, on a slow and a fast leader clock
	ld          [2]int // real ticks of the lock-delay, on a slow and a fast clock
	ldMin       int    // the shortest real lock-delay a correct leader times (P3's window)
	p4, live    int    // the bounds checked (Timely)
	capOrigin   int    // the cap of the ages a takeover reads (beyond the grace they behave alike)
	useReadAge  bool   // the takeover's read time is used at its install
	scratch     step   // the successor under construction (successors is not reentrant)
	fastChoices []uint8
	walls       []int8
}

func newModel(cfg Config) (*model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m := &model{cfg: cfg, p: cfg.Params, v: cfg.Variant, b: cfg.Bounds, n: len(cfg.Clients)}
	if m.b.Trace {
		m.b.Edges, m.b.LateDuties, m.b.DeposedRefusals, m.b.SlowTakeover = true, true, true, true
	}
	p := m.p
	m.w = p.TTL - p.Margin
	if m.v.NoMargin {
		m.w = p.TTL
	}
	grace := p.TTL + p.Election
	if m.v.GraceNoET {
		grace = p.TTL
	}
	for i, fast := range []bool{false, true} {
		m.ttl[i] = p.onClock(p.TTL, fast)
		m.grace[i] = p.onClock(grace, fast)
		m.ld[i] = p.onClock(p.LockDelay, fast)
	}
	m.fastChoices = []uint8{0}
	if p.EpsNum > 0 {
		m.fastChoices = append(m.fastChoices, 1)
	}
	m.ldMin = m.ld[len(m.fastChoices)-1]
	for o := -p.Wall; o <= p.Wall; o++ {
		m.walls = append(m.walls, int8(o))
	}
	if m.b.Timely {
		m.p4, m.live = cfg.P4, cfg.Live
		if m.p4 == 0 {
			m.p4 = p.Bound4()
		}
		if m.live == 0 {
			m.live = p.BoundLive()
		}
	}
	m.capOrigin = grace + 1
	m.useReadAge = !m.v.ReplayTime || !m.v.RenewPerTerm
	return m, nil
}

func ri(fast bool) int {
	if fast {
		return 1
	}
	return 0
}

// initial returns the initial states: a leader that has taken over (of
// every clock rate and wall offset), the clients' sessions open and just
// renewed — or, with Bounds.Open, not yet opened.
func (m *model) initial() []State {
	var out []State
	for _, fast := range m.fastChoices {
		for _, wall := range m.walls {
			var s State
			s.L.Phase = phaseLeading
			s.L.Fast = fast == 1
			s.L.Wall = wall
			s.M.WallTop = wall
			for c, k := range m.cfg.Clients {
				cl := &s.C[c]
				cl.Kind = uint8(k)
				if m.b.Open && k != Immortal {
					cl.Phase = cIdle
					continue
				}
				cl.Phase = cOpen
				s.F.Alive[c] = true
				s.F.Renewed[c] = true
				if k != Immortal {
					cl.V = uint8(m.w)
					s.L.Known[c] = true
					s.L.DL[c] = uint8(m.ttl[ri(s.L.Fast)])
				}
				if k == Keeper {
					cl.Keep = uint8(m.p.TTL)
				}
			}
			if m.b.Held {
				m.startHeld(&s)
			}
			out = append(out, s)
		}
	}
	return out
}

// startHeld gives the lock to the first client and queues the others.
func (m *model) startHeld(s *State) {
	for c := 0; c < m.n; c++ {
		cl := &s.C[c]
		cl.Seq, cl.AcqSeq, cl.Acqs = 1, 1, 1
		s.F.Owner[c], s.F.Permits[c] = 1, 1
		if m.b.Limit > 0 {
			s.F.Permits[c] = uint8(m.b.Permits[c])
		}
		if c == 0 {
			s.F.Counter, s.F.Tok[0], s.M.LastTok = 1, 1, 1
			cl.Win = winOpen
			continue
		}
		s.F.enqueue(c)
	}
}

// step is a successor under construction.
type step struct {
	m        *model
	s        State
	viol     *Violation
	disabled bool // the step turned out to leave the configuration's bounds
}

func (st *step) fail(prop, format string, args ...any) {
	if st.viol == nil {
		st.viol = &Violation{Prop: prop, Detail: fmt.Sprintf(format, args...)}
	}
}

// successors calls emit for every step enabled in s, with the state it
// leads to and the property it breaks, if any.
func (m *model) successors(s *State, emit func(Action, *State, *Violation)) {
	st := &m.scratch
	st.m = m
	try := func(a Action) {
		st.s, st.viol, st.disabled = *s, nil, false
		if st.apply(a) && !st.disabled {
			m.normalize(&st.s)
			emit(a, &st.s, st.viol)
		}
	}
	try(Action{Kind: aTick})
	if s.L.Phase == phaseNone {
		for _, f := range m.fastChoices {
			for _, w := range m.walls {
				try(Action{Kind: aElect, Arg: f, Arg2: uint8(int(w) + wallBias)})
			}
		}
	} else if int(s.L.Changes) < m.b.Changes {
		for k := 0; k <= int(s.L.NPend) && k < maxPending; k++ {
			try(Action{Kind: aDepose, Arg: uint8(k)})
		}
	}
	try(Action{Kind: aCommit})
	try(Action{Kind: aInstall})
	try(Action{Kind: aProposeEnd})
	try(Action{Kind: aBackup})
	try(Action{Kind: aRestore})
	try(Action{Kind: aOrphanExpire})
	try(Action{Kind: aRebuild})
	for c := 0; c < m.n; c++ {
		cc := uint8(c)
		try(Action{Kind: aProposeExpire, C: cc})
		for _, k := range []uint8{aOpen, aAcquire, aUnlock, aWithdraw, aClose, aLoseClose, aUnlockLost,
			aAsk, aKeeperRelease, aDeliver, aRevoke, aEndSession, aSendKA} {
			try(Action{Kind: k, C: cc})
		}
		if m.b.Dups > 0 {
			for seq := uint8(1); seq <= s.C[c].Seq; seq++ {
				try(Action{Kind: aDup, C: cc, Arg: seq})
			}
		}
		if m.b.Edges {
			try(Action{Kind: aLapse, C: cc})
		}
		for i := 0; i < maxKA; i++ {
			if s.C[c].KA[i].Stage == kaFree {
				continue
			}
			for _, k := range []uint8{aArrive, aArriveOld, aConfirm, aReply, aDrop, aArriveEdge, aRefuseOld} {
				try(Action{Kind: k, C: cc, Arg: uint8(i)})
			}
		}
	}
}

// apply performs a on st.s and reports whether a was enabled.
func (st *step) apply(a Action) bool {
	s, m := &st.s, st.m
	c := int(a.C)
	switch a.Kind {
	case aTick:
		return st.tick()
	case aElect:
		if s.L.Phase != phaseNone {
			return false
		}
		if m.b.Rebuild {
			w := int8(int(a.Arg2) - wallBias)
			if s.M.Rebuilt && (s.M.Now <= s.M.RebuildAt || !m.b.BehindClock && w < s.M.WallTop) {
				// Rebuilding takes time; and the stated bound: the new
				// cluster's clocks are not behind the old one's.
				return false
			}
			if !s.M.Rebuilt {
				s.M.WallTop = max(s.M.WallTop, w)
			}
		}
		s.L.Phase, s.L.Fast, s.L.Wall = phaseElected, a.Arg == 1, int8(int(a.Arg2)-wallBias)
		s.L.PendAge = 0
		if m.b.Trace {
			return true // the replay proposes the barrier where the run's log has it
		}
		return st.propose(entry{Kind: eMarker, Arg: s.L.Changes})
	case aDepose:
		return st.depose(int(a.Arg))
	case aCommit:
		if s.L.NPend == 0 || s.L.Phase == phaseNone {
			return false
		}
		e := s.L.Pend[0]
		copy(s.L.Pend[:], s.L.Pend[1:])
		s.L.Pend[maxPending-1] = entry{}
		s.L.NPend--
		s.L.PendAge = 0
		st.applyEntry(e)
		return true
	case aInstall:
		if s.L.Phase != phaseRead {
			return false
		}
		st.install()
		return true
	case aProposeExpire:
		l := &s.L
		if l.Phase != phaseLeading || !l.Known[c] || l.DL[c] != 0 || l.Expiring[c] || !s.F.Alive[c] {
			return false
		}
		l.Expiring[c] = true
		return st.propose(entry{Kind: eExpire, C: a.C})
	case aProposeEnd:
		if !st.delayDue() {
			return false
		}
		s.L.DelayArmed = false
		return st.propose(entry{Kind: eEndDelay, Arg: s.F.DelayTok})
	case aBackup:
		if m.b.Restores == 0 || s.F.HasBackup {
			return false
		}
		s.F.HasBackup, s.F.BackupTok = true, s.F.Counter
		if h := s.F.holder(m.n); h >= 0 && m.b.Limit == 0 {
			s.F.BackupHeld = s.F.Tok[h]
		}
		return true
	case aRestore:
		if !s.F.HasBackup || st.pendingHas(eRestore) || s.M.Restored {
			return false
		}
		s.M.Restored = true
		return st.propose(entry{Kind: eRestore})
	case aRebuild:
		return st.rebuild()
	case aOrphanExpire:
		if s.F.Orphan == 0 || s.L.Phase != phaseLeading {
			return false
		}
		s.F.Orphan = 0
		st.promote()
		return true
	case aLapse:
		cl := &s.C[c]
		if !m.b.Edges || cl.Kind == kindImmortal || cl.Phase != cOpen || cl.V != 0 {
			return false
		}
		cl.Phase = cLost
		st.windowLapsed(c)
		return true
	case aSendKA:
		cl := &s.C[c]
		if cl.Kind == kindImmortal || cl.Phase != cOpen || m.b.Sends > 0 && int(cl.Sent) >= m.b.Sends {
			return false
		}
		for i := 0; i < m.b.KA; i++ {
			if cl.KA[i].Stage == kaFree {
				cl.KA[i] = ka{Stage: kaToLeader}
				if m.b.Sends > 0 {
					cl.Sent++
				}
				return true
			}
		}
		return false
	case aArrive, aArriveOld, aConfirm, aReply, aDrop, aArriveEdge, aRefuseOld:
		return st.keepalive(a.Kind, c, int(a.Arg))
	case aDup:
		return st.deliver(c, true, a.Arg)
	}
	return st.clientAction(a.Kind, c)
}

// propose appends e to the leader's uncommitted entries.
func (st *step) propose(e entry) bool {
	l := &st.s.L
	if l.Phase == phaseNone || l.NPend >= maxPending {
		return false
	}
	if l.NPend == 0 {
		l.PendAge = 0
	}
	l.Pend[l.NPend] = e
	l.NPend++
	return true
}

func (st *step) pendingHas(kind uint8) bool {
	l := &st.s.L
	for i := 0; i < int(l.NPend); i++ {
		if l.Pend[i].Kind == kind {
			return true
		}
	}
	return false
}
