package lease

import (
	"fmt"
	"slices"
)

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
		for i := 0; i < maxKA; i++ {
			if s.C[c].KA[i].Stage == kaFree {
				continue
			}
			for _, k := range []uint8{aArrive, aArriveOld, aConfirm, aReply, aDrop} {
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
	case aArrive, aArriveOld, aConfirm, aReply, aDrop:
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
		if l.Known[c] {
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
			cl.CmdAge = satAdd(cl.CmdAge, m.w)
		}
		for i := range cl.KA {
			k := &cl.KA[i]
			if k.Stage == kaFree {
				continue
			}
			k.Age++
			if k.Stage == kaConfirm || k.Stage == kaRenew {
				k.Since = satAdd(k.Since, m.p.TTL)
			}
			if int(k.Age) > m.p.MaxAge {
				*k = ka{}
			}
		}
		if f.Alive[c] && m.p4 > 0 {
			cl.Silent = satAdd(cl.Silent, m.p4+1)
		}
		if cl.Phase == cOpen {
			cl.V = dec(cl.V)
			if cl.V == 0 {
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

// depose ends the leader's leadership; the first kept of its uncommitted
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
		if retry != cmdNone && cl.Cmd == cmdNone {
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
		if cl.Phase != cOpen || cl.Cmd != cmdNone || cl.AcqSeq != 0 || cl.Releasing != 0 || f.Owner[c] != 0 || int(cl.Acqs) >= m.b.Acquires {
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
	var e entry
	switch cl.Cmd {
	case cmdNone:
		return false
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
	if !st.propose(e) {
		return false
	}
	cl.Cmd, cl.CmdArg, cl.CmdAck = cmdNone, 0, 0
	return true
}

// normalize maps s to a representative of the states that behave alike:
// it clears the values nothing can read any more (a dead variable) and
// renumbers the tokens to 1…n, keeping their order (tokens are only
// compared), so that the counter stays bounded.
func (m *model) normalize(s *State) {
	if int(s.L.Changes) >= m.b.Changes && s.L.Phase == phaseLeading {
		// No leader will take over again: the ages only a takeover reads
		// are dead.
		for c := 0; c < m.n; c++ {
			s.F.Origin[c] = 0
		}
		s.F.DelayAge = 0
	}
	for c := 0; c < m.n; c++ {
		if !s.F.Alive[c] {
			s.C[c].Silent, s.F.Origin[c] = 0, 0
		}
	}
	if !m.b.Rebuild {
		m.renumber(s) // a rebuild's tokens are absolute: they are compared with wall clocks
	}
}

// renumber renumbers the tokens in s to 1…n, keeping their order.
func (m *model) renumber(s *State) {
	var vals [32]uint8
	n := 0
	add := func(v uint8) {
		if v != 0 {
			vals[n] = v
			n++
		}
	}
	f := &s.F
	for c := 0; c < m.n; c++ {
		add(f.Tok[c])
	}
	add(f.DelayTok)
	add(f.Counter)
	add(f.Orphan)
	add(f.BackupTok)
	add(f.BackupHeld)
	add(s.M.LastTok)
	for i := 0; i < int(s.L.NPend); i++ {
		if e := s.L.Pend[i]; e.Kind == eEndDelay || e.Kind == eRevoke {
			add(e.Arg)
		}
	}
	sorted := vals[:n]
	slices.Sort(sorted)
	sorted = slices.Compact(sorted)
	rank := func(v uint8) uint8 {
		if v == 0 {
			return 0
		}
		i, _ := slices.BinarySearch(sorted, v)
		return uint8(i + 1)
	}
	for c := 0; c < m.n; c++ {
		f.Tok[c] = rank(f.Tok[c])
	}
	f.DelayTok, f.Counter, f.Orphan = rank(f.DelayTok), rank(f.Counter), rank(f.Orphan)
	f.BackupTok, f.BackupHeld, s.M.LastTok = rank(f.BackupTok), rank(f.BackupHeld), rank(s.M.LastTok)
	for i := 0; i < int(s.L.NPend); i++ {
		if e := &s.L.Pend[i]; e.Kind == eEndDelay || e.Kind == eRevoke {
			e.Arg = rank(e.Arg)
		}
	}
}
