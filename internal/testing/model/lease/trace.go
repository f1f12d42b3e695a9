package lease

import (
	"fmt"
	"strings"
)

// Schedule prints the result's counterexample as a numbered schedule: each
// step with the real time after it and what it changed that matters (the
// leader, the clients' windows and validity, the lock).
func (r *Result) Schedule() string {
	if r.Violation == nil {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %v\n", r.Config, r.Violation)
	if len(r.Trace) == 0 {
		return b.String()
	}
	fmt.Fprintf(&b, "     start  %s\n", describe(&r.Trace[0].State))
	prev := r.Trace[0].State
	ticks := 0
	n := 1
	flush := func(t int) {
		if ticks > 0 {
			fmt.Fprintf(&b, "%3d. t=%-3d %d tick(s) pass   %s\n", n, t, ticks, describe(&prev))
			n++
			ticks = 0
		}
	}
	for _, st := range r.Trace[1:] {
		if st.Action.Kind == aTick {
			ticks++
			prev = st.State
			continue
		}
		flush(st.Time)
		fmt.Fprintf(&b, "%3d. t=%-3d %-42s %s\n", n, st.Time, actionText(st.Action, &st.State), describe(&st.State))
		n++
		prev = st.State
	}
	flush(r.Trace[len(r.Trace)-1].Time)
	fmt.Fprintf(&b, "     → %v\n", r.Violation)
	return b.String()
}

// Steps returns the number of steps of the counterexample (ticks counted
// one by one).
func (r *Result) Steps() int { return max(len(r.Trace)-1, 0) }

func actionText(a Action, s *State) string {
	switch a.Kind {
	case aDup:
		return fmt.Sprintf("duplicate of c%d's request %d", a.C, a.Arg)
	case aCommit:
		return "commit"
	}
	return a.String()
}

// describe summarises a state in one line.
func describe(s *State) string {
	var b strings.Builder
	phases := []string{"no leader", "elected", "taking over", "leading"}
	fmt.Fprintf(&b, "[leader: %s", phases[s.L.Phase])
	if s.L.Phase != phaseNone && s.L.Fast {
		b.WriteString(" fast")
	}
	if s.L.Stale > 0 {
		fmt.Fprintf(&b, ", deposed acks %d", s.L.Stale)
	}
	if s.L.NPend > 0 {
		b.WriteString(", log:")
		for i := 0; i < int(s.L.NPend); i++ {
			b.WriteString(" " + entryText(s.L.Pend[i]))
		}
	}
	b.WriteString("] [")
	first := true
	for c := 0; c < maxClients; c++ {
		cl := &s.C[c]
		if cl.Kind == 0 {
			continue
		}
		if !first {
			b.WriteString("; ")
		}
		first = false
		fmt.Fprintf(&b, "c%d", c)
		switch cl.Phase {
		case cIdle:
			b.WriteString(" no session")
		case cOpening:
			b.WriteString(" opening")
		case cLost:
			b.WriteString(" lost")
		case cClosed:
			b.WriteString(" closed")
		}
		if cl.Kind != kindImmortal && cl.Phase == cOpen {
			fmt.Fprintf(&b, " valid %d", cl.V)
		}
		if cl.Kind == kindKeeper && cl.Phase == cOpen {
			fmt.Fprintf(&b, " http %d", cl.Keep)
		}
		switch cl.Win {
		case winOpen:
			b.WriteString(" HOLDS")
		case winExempt:
			b.WriteString(" holds(revoked)")
		}
		if s.L.Known[c] && s.L.Phase == phaseLeading {
			fmt.Fprintf(&b, " dl %d", s.L.DL[c])
		}
		if !s.F.Alive[c] && cl.Phase != cIdle && cl.Phase != cOpening {
			b.WriteString(" (ended)")
		}
		for _, k := range cl.KA {
			if k.Stage != kaFree {
				fmt.Fprintf(&b, " ka:%s/%d", kaStages[k.Stage], k.Age)
			}
		}
	}
	b.WriteString("] [lock:")
	h := -1
	for c := 0; c < maxClients; c++ {
		if s.F.Tok[c] != 0 {
			fmt.Fprintf(&b, " c%d", c)
			h = c
		}
	}
	if h < 0 && s.F.Orphan == 0 {
		b.WriteString(" free")
	}
	if s.F.Orphan != 0 {
		b.WriteString(" restored holder")
	}
	if s.F.Delayed {
		b.WriteString(" delayed")
	}
	if q := s.F.queueLen(); q > 0 {
		b.WriteString(", waiting:")
		for i := 0; i < q; i++ {
			fmt.Fprintf(&b, " c%d", s.F.Queue[i]-1)
		}
	}
	b.WriteString("]")
	return b.String()
}

var kaStages = []string{"", "sent", "confirming", "confirming@deposed", "renewing", "renewing@deposed", "acked", "refused"}

func entryText(e entry) string {
	switch e.Kind {
	case eOpen:
		return fmt.Sprintf("Open(c%d)", e.C)
	case eClose:
		if e.Arg == 1 {
			return fmt.Sprintf("Close(c%d, sent after its lapse)", e.C)
		}
		return fmt.Sprintf("Close(c%d)", e.C)
	case eAcquire:
		return fmt.Sprintf("Acquire(c%d#%d)", e.C, e.Arg)
	case eRelease:
		if e.Arg2 == 1 {
			return fmt.Sprintf("Release(c%d#%d, sent after its lapse)", e.C, e.Arg)
		}
		return fmt.Sprintf("Release(c%d#%d)", e.C, e.Arg)
	case eExpire:
		return fmt.Sprintf("Expire(c%d)", e.C)
	case eEndDelay:
		return "EndDelay"
	case eMarker:
		return "Barrier"
	case eRenewed:
		return fmt.Sprintf("Renewed(c%d)", e.C)
	case eRevoke:
		return "Revoke"
	case eEndSession:
		return fmt.Sprintf("EndSession(c%d)", e.C)
	case eRestore:
		return "Restore"
	case eRaise:
		return fmt.Sprintf("RaiseTokens(%d)", e.Arg)
	}
	return "?"
}
