package lease

import (
	"testing"
)

// mustModel builds the model of a configuration with a lease holder and a
// waiting immortal client.
func mustModel(t *testing.T, p Params, v Variant, b Bounds) *model {
	t.Helper()
	b.Held = true
	m, err := newModel(Config{Name: t.Name(), Params: p, Variant: v, Clients: []ClientKind{Lease, Immortal}, Bounds: b})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// slowStart returns the initial state whose leader's clock is slow and
// whose wall offset is 0.
func slowStart(t *testing.T, m *model) State {
	t.Helper()
	for _, s := range m.initial() {
		if !s.L.Fast && s.L.Wall == 0 {
			return s
		}
	}
	t.Fatal("no slow initial state")
	return State{}
}

// do applies actions in order, failing the test if one is not enabled; it
// returns the state and the first violation.
func do(t *testing.T, m *model, s State, acts ...Action) (State, *Violation) {
	t.Helper()
	var viol *Violation
	for _, a := range acts {
		st := step{m: m, s: s}
		if !st.apply(a) || st.disabled {
			t.Fatalf("%v is not enabled in %s", a, describe(&s))
		}
		m.normalize(&st.s)
		s = st.s
		if viol == nil {
			viol = st.viol
		}
	}
	return s, viol
}

func ticks(n int) []Action {
	out := make([]Action, n)
	for i := range out {
		out[i] = Action{Kind: aTick}
	}
	return out
}

func TestOnClock(t *testing.T) {
	p := DefaultParams()
	for _, tc := range []struct {
		d    int
		fast bool
		want int
	}{
		{20, false, 20}, {20, true, 19}, {22, true, 20}, {3, true, 2}, {0, true, 0},
	} {
		if got := p.onClock(tc.d, tc.fast); got != tc.want {
			t.Errorf("onClock(%d, fast %v) = %d, want %d", tc.d, tc.fast, got, tc.want)
		}
	}
}

// TestInstallDeadlines: what a new leader's takeover gives a session read
// at the barrier, one opened between the read and the install, and one
// whose origin marker is older, in today's design and the fixed one.
func TestInstallDeadlines(t *testing.T) {
	p := SmallParams() // TTL 10, grace 12
	for _, tc := range []struct {
		name                  string
		v                     Variant
		replayed, renewed     bool
		readAge, origin, want uint8
	}{
		{"today: grace from the read", Today(), false, false, 4, 0, 8},
		{"today: a replayed open timed from the read", Today(), true, true, 4, 0, 6},
		{"fixed: grace from the origin marker", Fixed(), false, false, 4, 4, 8},
		{"fixed: an older origin marker counts", Fixed(), false, false, 0, 9, 3},
		{"fixed: an origin beyond the grace expires at once", Fixed(), false, false, 0, 13, 0},
		{"fixed: a replayed open timed from the replay", Fixed(), true, true, 4, 0, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := mustModel(t, p, tc.v, Bounds{Changes: 1})
			var s State
			s.L.Phase, s.L.ReadAge = phaseRead, tc.readAge
			s.L.Known[0], s.L.Replayed[0] = true, tc.replayed
			s.F.Alive[0], s.F.Renewed[0], s.F.Origin[0] = true, tc.renewed, tc.origin
			st := step{m: m, s: s}
			st.install()
			if got := st.s.L.DL[0]; got != tc.want || st.s.L.Phase != phaseLeading {
				t.Fatalf("deadline %d (phase %d), want %d", got, st.s.L.Phase, tc.want)
			}
		})
	}
}

// TestLapsedEnd: a close or release marked Lapsed starts the lock-delay in
// the fixed design, not in today's; a close by a valid client never does.
func TestLapsedEnd(t *testing.T) {
	for _, tc := range []struct {
		name    string
		v       Variant
		e       entry
		delayed bool
	}{
		{"fixed: lapsed close", Fixed(), entry{Kind: eClose, C: 0, Arg: 1}, true},
		{"fixed: lapsed release", Fixed(), entry{Kind: eRelease, C: 0, Arg: 1, Arg2: 1}, true},
		{"fixed: close", Fixed(), entry{Kind: eClose, C: 0}, false},
		{"fixed: release", Fixed(), entry{Kind: eRelease, C: 0, Arg: 1}, false},
		{"today: lapsed close", Today(), entry{Kind: eClose, C: 0, Arg: 1}, false},
		{"expiry", Today(), entry{Kind: eExpire, C: 0}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := mustModel(t, DefaultParams(), tc.v, Bounds{})
			s := slowStart(t, m)
			st := step{m: m, s: s}
			st.applyEntry(tc.e)
			f := &st.s.F
			if f.Delayed != tc.delayed {
				t.Fatalf("delayed %v, want %v", f.Delayed, tc.delayed)
			}
			if got := f.Tok[1] != 0; got == tc.delayed {
				t.Fatalf("the waiter granted %v with the lock delayed %v", got, tc.delayed)
			}
			if tc.delayed && !st.s.L.DelayArmed {
				t.Fatalf("the leader did not time the delay")
			}
		})
	}
}

// TestKeepaliveOfMarkedSession: in the fixed design the first keepalive
// of a session after a takeover waits for its Renewed entry; only then is
// it acknowledged, and its deadline runs from its arrival.
func TestKeepaliveOfMarkedSession(t *testing.T) {
	m := mustModel(t, SmallParams(), Fixed(), Bounds{Changes: 1, KA: 1})
	s := slowStart(t, m)
	s, _ = do(t, m, s,
		Action{Kind: aDepose}, Action{Kind: aElect, Arg2: wallBias}, Action{Kind: aCommit}, Action{Kind: aInstall})
	if s.F.Renewed[0] {
		t.Fatal("the takeover barrier left the session renewed")
	}
	s, _ = do(t, m, s, ticks(5)...)
	s, _ = do(t, m, s, Action{Kind: aSendKA, C: 0}, Action{Kind: aArrive, C: 0})
	if k := s.C[0].KA[0]; k.Stage != kaRenew || s.L.NPend != 1 || s.L.Pend[0].Kind != eRenewed {
		t.Fatalf("keepalive %+v, log %+v", k, s.L.Pend[:s.L.NPend])
	}
	if st := (step{m: m, s: s}); st.apply(Action{Kind: aConfirm, C: 0}) {
		t.Fatal("acknowledged before its Renewed entry committed")
	}
	s, _ = do(t, m, s, Action{Kind: aTick}, Action{Kind: aCommit}, Action{Kind: aConfirm, C: 0})
	// The grace left 6 ticks; the keepalive received a tick ago gives TTL − 1.
	if !s.F.Renewed[0] || s.C[0].KA[0].Stage != kaReply || s.L.DL[0] != 9 {
		t.Fatalf("renewed %v, keepalive %+v, deadline %d, want 9", s.F.Renewed[0], s.C[0].KA[0], s.L.DL[0])
	}
}

// TestKeepaliveAfterDeadline: a keepalive that reaches the leader at its
// session's deadline is refused, and the refusal ends the client's lease.
func TestKeepaliveAfterDeadline(t *testing.T) {
	p := SmallParams()
	p.Margin = 0 // so that the client is still valid when the leader's deadline passes
	m := mustModel(t, p, Fixed(), Bounds{KA: 1})
	s := slowStart(t, m)
	s, _ = do(t, m, s, ticks(9)...)
	s, _ = do(t, m, s, Action{Kind: aSendKA, C: 0}, Action{Kind: aTick})
	s, _ = do(t, m, s, Action{Kind: aArrive, C: 0})
	if s.C[0].KA[0].Stage != kaRefused {
		t.Fatalf("keepalive %+v, want refused", s.C[0].KA[0])
	}
}

// TestDeposeKeepsPrefix: a new leader's log keeps a prefix of the old
// leader's uncommitted entries; a client command that did not survive is
// proposed again, a deposed leader's confirmations may still complete.
func TestDeposeKeepsPrefix(t *testing.T) {
	m := mustModel(t, SmallParams(), Fixed(), Bounds{Changes: 1, KA: 1})
	start := slowStart(t, m)
	start, _ = do(t, m, start, Action{Kind: aSendKA, C: 0}, Action{Kind: aArrive, C: 0})
	start.C[0].Phase, start.C[0].Cmd = cLost, cmdCloseLapsed // as Session.lose after a lapse
	start, _ = do(t, m, start, Action{Kind: aDeliver, C: 0})
	start.L.Pend[start.L.NPend] = entry{Kind: eExpire, C: 0}
	start.L.NPend++

	s, _ := do(t, m, start, Action{Kind: aDepose, Arg: 1})
	if s.L.NPend != 1 || s.L.Pend[0].Kind != eClose || s.L.Changes != 1 || s.L.Phase != phaseNone || s.C[0].Cmd != cmdNone {
		t.Fatalf("after depose keeping 1: %+v, cmd %d", s.L, s.C[0].Cmd)
	}
	if s.C[0].KA[0].Stage != kaConfirmOld {
		t.Fatalf("keepalive %+v, want a confirmation at the deposed leader", s.C[0].KA[0])
	}
	s, _ = do(t, m, s, Action{Kind: aElect, Arg2: wallBias})
	if s.L.NPend != 2 || s.L.Pend[1].Kind != eMarker {
		t.Fatalf("the new leader's barrier does not follow the kept entries: %+v", s.L.Pend[:s.L.NPend])
	}

	s, _ = do(t, m, start, Action{Kind: aDepose, Arg: 0})
	if s.L.NPend != 0 || s.C[0].Cmd != cmdCloseLapsed {
		t.Fatalf("a dropped close is not proposed again: %d entries, cmd %d", s.L.NPend, s.C[0].Cmd)
	}
}

// TestExactlyOnce: the machine's request filter (fsm's applier.once).
func TestExactlyOnce(t *testing.T) {
	for _, tc := range []struct {
		name        string
		noFloor     bool
		floor, done uint8
		seq, ack    uint8
		runs        bool
		floorAfter  uint8
	}{
		{"new request", false, 1, 0, 1, 0, true, 1},
		{"duplicate", false, 1, 0b1, 1, 0, false, 1},
		{"stale below the floor", false, 2, 0, 1, 0, false, 2},
		{"the ack raises the floor", false, 1, 0b1, 2, 2, true, 2},
		{"without a floor a stale request runs again", true, 2, 0, 1, 0, true, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := Fixed()
			v.NoFloor = tc.noFloor
			m := mustModel(t, SmallParams(), v, Bounds{Dups: 1})
			st := step{m: m}
			st.s.F.Floor[0], st.s.F.Done[0] = tc.floor, tc.done
			if got := st.once(0, tc.seq, tc.ack); got != tc.runs || st.s.F.Floor[0] != tc.floorAfter {
				t.Fatalf("runs %v floor %d, want %v %d", got, st.s.F.Floor[0], tc.runs, tc.floorAfter)
			}
		})
	}
}

// TestLapseStartsGuard: the tick at which a holder's validity runs out
// opens P3's window of the full (shortest correct) lock-delay.
func TestLapseStartsGuard(t *testing.T) {
	m := mustModel(t, DefaultParams(), Fixed(), Bounds{})
	s := slowStart(t, m)
	s, _ = do(t, m, s, ticks(18)...)
	if s.M.Guard != 0 || s.C[0].Win != winOpen {
		t.Fatalf("guard %d window %d before the lapse", s.M.Guard, s.C[0].Win)
	}
	s, _ = do(t, m, s, Action{Kind: aTick})
	if s.C[0].Phase != cLost || s.M.Guard != uint8(m.ldMin) || s.M.GuardBy != 1 {
		t.Fatalf("phase %d guard %d (want %d) by %d", s.C[0].Phase, s.M.Guard, m.ldMin, s.M.GuardBy)
	}
}

// TestRenumber: tokens are renumbered 1…n in order, everywhere they occur.
func TestRenumber(t *testing.T) {
	m := mustModel(t, DefaultParams(), Fixed(), Bounds{})
	var s State
	s.F.Tok[0], s.F.DelayTok, s.F.Counter, s.M.LastTok = 40, 17, 41, 41
	s.L.Pend[0], s.L.NPend = entry{Kind: eEndDelay, Arg: 17}, 1
	m.renumber(&s)
	if s.F.Tok[0] != 2 || s.F.DelayTok != 1 || s.F.Counter != 3 || s.M.LastTok != 3 || s.L.Pend[0].Arg != 1 {
		t.Fatalf("renumbered: tok %d delay %d counter %d last %d pending %d", s.F.Tok[0], s.F.DelayTok, s.F.Counter, s.M.LastTok, s.L.Pend[0].Arg)
	}
}

func TestFingerprints(t *testing.T) {
	f := newFingerprints(4)
	for i := uint64(0); i < 1000; i++ {
		if !f.insert(i * 0x9e3779b97f4a7c15) {
			t.Fatalf("%d reported seen", i)
		}
	}
	for i := uint64(0); i < 1000; i++ {
		if f.insert(i * 0x9e3779b97f4a7c15) {
			t.Fatalf("%d reported new twice", i)
		}
	}
	if f.n != 1000 {
		t.Fatalf("%d fingerprints", f.n)
	}
}

func TestConfigValidate(t *testing.T) {
	ok := Config{Params: DefaultParams(), Clients: []ClientKind{Lease}}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]Config{
		"no clients":    {Params: DefaultParams()},
		"four clients":  {Params: DefaultParams(), Clients: []ClientKind{Lease, Lease, Lease, Lease}},
		"margin ≥ TTL":  {Params: Params{TTL: 5, Margin: 5, MaxAge: 1, Commit: 1, Outage: 1, MinLead: 2}, Clients: []ClientKind{Lease}},
		"semaphore":     {Params: DefaultParams(), Clients: []ClientKind{Immortal}, Bounds: Bounds{Limit: 2}},
		"unknown kind":  {Params: DefaultParams(), Clients: []ClientKind{9}},
		"MinLead small": {Params: Params{TTL: 5, MaxAge: 1, Commit: 2, Outage: 1, MinLead: 2}, Clients: []ClientKind{Lease}},
	} {
		if err := c.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
