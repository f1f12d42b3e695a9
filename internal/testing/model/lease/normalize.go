package lease

import "slices"

// normalize maps s to a representative of the states that behave alike:
// it clears the values nothing can read any more (a dead variable) and
// renumbers the tokens to 1…n, keeping their order (tokens are only
// compared), so that the counter stays bounded.
func (m *model) normalize(s *State) {
	if int(s.L.Changes) >= m.b.Changes && s.L.Phase == phaseLeading && !m.b.Trace {
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
