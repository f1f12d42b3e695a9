package lease

// The replicated state machine at the level of the design (package fsm's
// applier), and the leader's reactions to what it applies (expiryManager's
// observe). Properties about grants are checked where grants happen.

// applyEntry applies a committed entry on every replica.
func (st *step) applyEntry(e entry) {
	s, m := &st.s, st.m
	f, l := &s.F, &s.L
	c := int(e.C)
	switch e.Kind {
	case eMarker:
		if m.v.RenewPerTerm {
			for d := 0; d < m.n; d++ {
				if f.Alive[d] && f.Renewed[d] {
					f.Renewed[d], f.Origin[d] = false, 0
				}
			}
		}
		if e.Arg == l.Changes && l.Phase == phaseElected {
			// The takeover barrier is applied: the new leader reads the
			// sessions and its clock.
			l.Phase, l.ReadAge = phaseRead, 0
			for d := 0; d < m.n; d++ {
				l.Known[d] = f.Alive[d] && s.C[d].Kind != kindImmortal
				l.Replayed[d], l.Expiring[d], l.DL[d] = false, false, 0
			}
		}
	case eOpen:
		if f.Alive[c] {
			return
		}
		f.Alive[c], f.Renewed[c], f.Origin[c] = true, true, 0
		f.Floor[c], f.Done[c], f.Freed[c], f.Owner[c] = 0, 0, 0, 0
		cl := &s.C[c]
		cl.Silent = 0
		if cl.Phase == cOpening {
			cl.Phase = cOpen
			if cl.Kind != kindImmortal {
				// The open counts as the first keepalive, sent when the
				// client sent OpenSession.
				v := m.w - int(cl.CmdAge)
				if v < 0 || v == 0 && !m.b.Edges { // with Edges a window of 0 ends within this tick
					cl.Phase = cLost
				} else {
					cl.V = uint8(v)
				}
				if cl.Kind == kindKeeper {
					cl.Keep = uint8(m.p.TTL)
				}
			}
		}
		if cl.Kind == kindImmortal {
			return
		}
		switch l.Phase {
		case phaseLeading:
			l.Known[c], l.Expiring[c] = true, false
			l.DL[c] = uint8(m.ttl[ri(l.Fast)])
		case phaseRead:
			l.Known[c], l.Replayed[c] = true, true
		}
	case eClose:
		if f.Alive[c] {
			st.endSession(c, e.Arg == 1 && st.lapsedDelays())
		}
	case eExpire:
		if f.Alive[c] {
			st.endSession(c, true)
		}
	case eEndSession:
		if f.Alive[c] {
			st.exempt(c)
			if int(s.M.GuardBy) == c+1 && !m.cfg.NoException {
				s.M.Guard, s.M.GuardBy = 0, 0 // ending a session skips its lock-delay: the documented exception
			}
			st.endSession(c, false)
		}
	case eAcquire:
		st.acquire(c, e.Arg, e.Ack, e.Arg2 == 1)
	case eRelease:
		st.release(c, e.Arg, e.Ack, e.Arg2 == 1 && st.lapsedDelays())
	case eEndDelay:
		if f.Delayed && f.DelayTok == e.Arg {
			f.Delayed, f.DelayTok, f.DelayAge, f.DelayWall = false, 0, 0, 0
			l.DelayArmed, l.DelayT = false, 0
			st.promote()
		}
	case eRenewed:
		if f.Alive[c] {
			f.Renewed[c], f.Origin[c] = true, 0
			// The keepalives waiting for this entry may be confirmed: at
			// its leader as any other, at a deposed one (whose entry
			// survived) without a deadline to move.
			for i := range s.C[c].KA {
				k := &s.C[c].KA[i]
				switch {
				case k.Stage == kaRenew && k.Term == e.Arg:
					k.Stage, k.Term = kaConfirm, 0
				case k.Stage == kaRenewOld && k.Term == e.Arg:
					k.Stage, k.Term = kaConfirmOld, 0
				}
			}
		}
		l.Renewing[c] = false
		for i := 0; i < int(l.NPend); i++ {
			if p := l.Pend[i]; p.Kind == eRenewed && int(p.C) == c {
				l.Renewing[c] = true
			}
		}
	case eRevoke:
		for d := 0; d < m.n; d++ {
			if f.Tok[d] != 0 && f.Tok[d] == e.Arg {
				st.exempt(d)
				f.Owner[d] = 0
				st.endGrant(d, true) // a revoke waits for the holder's lock-delay
				st.promote()
			}
		}
	case eRestore:
		st.restore()
	case eRaise:
		f.Counter = max(f.Counter, e.Arg)
		s.M.Raised = s.M.Raised || s.M.Rebuilt
	}
}

// lapsedDelays reports whether a close or release marked Lapsed starts the
// lock-delay.
func (st *step) lapsedDelays() bool { return st.m.v.LapsedEnd && !st.m.v.SkipLapseDelay }

// exempt marks client c's open window as taken by an operator action (the
// documented exception to P1).
func (st *step) exempt(c int) {
	if cl := &st.s.C[c]; cl.Win == winOpen && !st.m.cfg.NoException {
		cl.Win = winExempt
	}
}

// endSession removes session c: its grant ends (into the lock-delay when
// delay and the session has one), its wait is dropped, the lock passes on.
func (st *step) endSession(c int, delay bool) {
	s := &st.s
	f, l := &s.F, &s.L
	if f.Tok[c] != 0 {
		st.endGrant(c, delay)
	}
	if f.queued(c) {
		f.dequeue(c)
	}
	f.Owner[c] = 0
	s.C[c].Releasing = 0
	f.Alive[c], f.Renewed[c], f.Origin[c] = false, false, 0
	f.Floor[c], f.Done[c] = 0, 0
	l.Known[c], l.Expiring[c], l.Replayed[c], l.DL[c] = false, false, false, 0
	st.promote()
}

// endGrant takes client c's grant away: an exclusive grant enters the
// lock-delay when delay is set and sessions have one.
func (st *step) endGrant(c int, delay bool) {
	s, m := &st.s, st.m
	f, l := &s.F, &s.L
	tok := f.Tok[c]
	f.Tok[c] = 0
	if !delay || m.p.LockDelay == 0 || m.b.Limit > 0 {
		return
	}
	f.Delayed, f.DelayTok, f.DelayAge = true, tok, 0
	if m.v.WallDelay {
		f.DelayWall = int8(int(l.Wall) + m.p.LockDelay)
	}
	if l.Phase == phaseLeading {
		l.DelayArmed = true
		l.DelayT = uint8(m.ld[ri(l.Fast)])
	}
}

// used returns the permits granted.
func (st *step) used() int {
	f, m := &st.s.F, st.m
	n := 0
	for c := 0; c < m.n; c++ {
		if f.Tok[c] != 0 {
			n += int(f.Permits[c])
		}
	}
	return n
}

func (st *step) permitsOf(c int) uint8 {
	if st.m.b.Limit == 0 {
		return 1
	}
	return uint8(st.m.b.Permits[c])
}

// fits reports whether client c's acquisition fits now.
func (st *step) fits(c int) bool {
	f, m := &st.s.F, st.m
	if f.Delayed || f.Orphan != 0 {
		return false
	}
	if m.b.Limit == 0 {
		return f.holder(m.n) < 0
	}
	return st.used()+int(f.Permits[c]) <= m.b.Limit
}

// promote grants the lock to the waiters at the head of the queue, in FIFO
// order, while they fit.
func (st *step) promote() {
	f := &st.s.F
	for f.queueLen() > 0 {
		head := int(f.Queue[0]) - 1
		if !st.fits(head) {
			return
		}
		f.dequeue(head)
		st.grant(head)
	}
}

// acquire applies client c's Acquire with request number seq (exactly
// once: a duplicate gets its original result and changes nothing; a
// request below the ack floor is stale); try: a TryLock (the replay of a
// run: Conform), which does not wait.
func (st *step) acquire(c int, seq, ack uint8, try bool) {
	s, m := &st.s, st.m
	f := &s.F
	if !f.Alive[c] {
		return
	}
	if m.b.Dups > 0 {
		if !st.once(c, seq, ack) {
			return
		}
	}
	if f.Owner[c] == seq {
		return // idempotent on the owner: the current status
	}
	if seq <= f.Freed[c] {
		st.fail("P5", "c%d's acquisition %d, released, executes again", c, seq)
		return
	}
	if f.Owner[c] != 0 || seq != s.C[c].AcqSeq && seq != s.C[c].Gone {
		return // an older request of a session with a newer acquisition: out of the model's scope
	}
	f.Owner[c], f.Permits[c] = seq, st.permitsOf(c)
	switch {
	case f.queueLen() == 0 && st.fits(c):
		st.grant(c)
	case m.v.Barging && st.fits(c):
		st.fail("P6", "c%d is granted while c%d waits ahead of it", c, int(f.Queue[0])-1)
		st.grant(c)
	case try:
		// A TryLock that does not get the lock at once is refused and
		// leaves nothing behind; its call returns.
		f.Owner[c], f.Permits[c] = 0, 0
		if cl := &s.C[c]; cl.AcqSeq == seq {
			cl.AcqSeq = 0
		}
	default:
		f.enqueue(c)
	}
}

// once is the exactly-once filter of requests (fsm's applier.once): it
// reports whether request seq of session c executes.
func (st *step) once(c int, seq, ack uint8) bool {
	f, m := &st.s.F, st.m
	if seq < f.Floor[c] && !m.v.NoFloor {
		return false // stale
	}
	if seq >= f.Floor[c] && f.Done[c]&(1<<(seq-f.Floor[c])) != 0 {
		return false // a duplicate: its original result, nothing changes
	}
	st.raiseFloor(c, ack)
	if seq >= f.Floor[c] {
		f.Done[c] |= 1 << (seq - f.Floor[c])
	}
	return true
}

// raiseFloor raises session c's ack floor (never lowers it) and drops the
// results below it.
func (st *step) raiseFloor(c int, ack uint8) {
	f := &st.s.F
	if ack > f.Floor[c] {
		f.Done[c] >>= ack - f.Floor[c]
		f.Floor[c] = ack
	}
}

// release applies client c's Release of its acquisition owner (a
// compare-and-delete by owner; lapsed: with expiry semantics).
func (st *step) release(c int, owner, ack uint8, lapsed bool) {
	s, m := &st.s, st.m
	f := &s.F
	if !f.Alive[c] {
		return
	}
	if m.b.Dups > 0 {
		st.raiseFloor(c, ack)
	}
	f.Freed[c] = max(f.Freed[c], owner)
	if s.C[c].Releasing == owner {
		s.C[c].Releasing = 0
	}
	if f.Owner[c] != owner || owner == 0 {
		return // not holder
	}
	if f.Tok[c] != 0 {
		st.endGrant(c, lapsed)
	} else {
		f.dequeue(c)
	}
	f.Owner[c] = 0
	st.promote()
}

// grant gives the lock to client c with the next token, checking P1, P2,
// P3 and P6.
func (st *step) grant(c int) {
	s, m := &st.s, st.m
	f := &s.F
	open := 0
	for d := 0; d < m.n; d++ {
		if d != c && s.C[d].Win == winOpen {
			open += int(st.permitsOf(d))
		}
	}
	limit := max(m.b.Limit, 1)
	if open+int(st.permitsOf(c)) > limit {
		st.fail("P1", "c%d is granted while another holder's validity window is open", c)
	}
	if s.M.Guard > 0 && m.b.Limit == 0 {
		st.fail("P3", "c%d is granted %d tick(s) before a lapsed holder's lock-delay ends", c, s.M.Guard)
	}
	if m.b.Limit > 0 && st.used()+int(f.Permits[c]) > m.b.Limit {
		st.fail("P6", "c%d's %d permits exceed the limit %d", c, f.Permits[c], m.b.Limit)
	}
	if m.b.Rebuild {
		if int(s.M.Grants) >= tokensPerTick-1 {
			st.disabled = true // the stated bound: fewer grants than tokensPerTick in a tick
		}
		s.M.Grants++
	}
	f.Counter++
	f.Tok[c] = f.Counter
	// A new cluster's grants before its first leader's raise commits are
	// the documented exception (docs/guarantees.md, "Fencing tokens").
	exception := s.M.Rebuilt && !s.M.Raised
	if f.Counter <= s.M.LastTok && !exception {
		st.fail("P2", "c%d is granted token %d, not above %d granted before", c, f.Counter, s.M.LastTok)
	}
	s.M.LastTok = max(s.M.LastTok, f.Counter)
	if f.Owner[c] <= f.Freed[c] {
		st.fail("P5", "c%d's released acquisition %d is granted", c, f.Owner[c])
	}
	cl := &s.C[c]
	// With Edges a window of 0 ends within this tick: the client is valid
	// until it lapses (aLapse), and holds a grant made before.
	valid := cl.Kind == kindImmortal || (cl.V > 0 || m.b.Edges) && (cl.Kind != kindKeeper || cl.Keep > 0)
	if cl.Phase == cOpen && valid && cl.AcqSeq == f.Owner[c] && cl.Gone != f.Owner[c] {
		cl.Win = winOpen
	}
	s.M.Wait = 0
}

// restore installs the backup as a replicated command: the sessions of
// the running cluster are replaced (their holders' windows are the
// documented exception), the backup's holder is a session nobody keeps
// alive, and the grant counter is the larger of the two.
func (st *step) restore() {
	s, m := &st.s, st.m
	f, l := &s.F, &s.L
	counter := max(f.Counter, f.BackupTok)
	if m.v.RestoreNoMax {
		counter = f.BackupTok
	}
	for c := 0; c < m.n; c++ {
		st.exempt(c)
		f.Tok[c], f.Owner[c], f.Alive[c], f.Renewed[c], f.Origin[c] = 0, 0, false, false, 0
		f.Floor[c], f.Done[c], f.Freed[c] = 0, 0, 0
		l.Known[c], l.Expiring[c], l.Replayed[c], l.DL[c] = false, false, false, 0
		cl := &s.C[c]
		if cl.Kind == kindImmortal {
			// Its session is gone: the application opens another.
			cl.Phase, cl.AcqSeq, cl.Cmd, cl.Acqs, cl.Releasing = cIdle, 0, cmdNone, 0, 0
		}
	}
	f.Queue = [maxClients]uint8{}
	if !m.cfg.NoException {
		s.M.Guard, s.M.GuardBy = 0, 0 // a restore replaces the lock table, delays included: the documented exception
	}
	f.Delayed, f.DelayTok, f.DelayAge = false, 0, 0
	l.DelayArmed = false
	f.Orphan = f.BackupHeld
	f.Counter = counter
}
