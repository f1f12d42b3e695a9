package membership

import (
	"fmt"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

func founder(id string) Founder { return Founder{ID: id, Addr: id + ":7400", Incarnation: "i" + id} }

func founders(ids ...string) []Founder {
	var out []Founder
	for _, id := range ids {
		out = append(out, founder(id))
	}
	return out
}

func TestAcceptor(t *testing.T) {
	b := func(r uint64, p string) Ballot { return Ballot{Round: r, Proposer: p} }
	v := NewValue(founders("a", "b", "c"))
	w := NewValue(founders("b", "d", "e"))
	cases := []struct {
		name   string
		a      Acceptor
		op     func(Acceptor) (Acceptor, bool)
		wantOK bool
		want   Acceptor
	}{
		{"first prepare", Acceptor{}, func(a Acceptor) (Acceptor, bool) { return a.OnPrepare(b(1, "a")) }, true, Acceptor{Promised: b(1, "a")}},
		{"equal ballot refused", Acceptor{Promised: b(1, "a")}, func(a Acceptor) (Acceptor, bool) { return a.OnPrepare(b(1, "a")) }, false, Acceptor{Promised: b(1, "a")}},
		{"lower round refused", Acceptor{Promised: b(2, "a")}, func(a Acceptor) (Acceptor, bool) { return a.OnPrepare(b(1, "z")) }, false, Acceptor{Promised: b(2, "a")}},
		{"same round higher proposer", Acceptor{Promised: b(2, "a")}, func(a Acceptor) (Acceptor, bool) { return a.OnPrepare(b(2, "b")) }, true, Acceptor{Promised: b(2, "b")}},
		{"prepare keeps accepted", Acceptor{Promised: b(1, "a"), AcceptedBallot: b(1, "a"), Accepted: v}, func(a Acceptor) (Acceptor, bool) { return a.OnPrepare(b(3, "c")) }, true,
			Acceptor{Promised: b(3, "c"), AcceptedBallot: b(1, "a"), Accepted: v}},
		{"accept at promised", Acceptor{Promised: b(1, "a")}, func(a Acceptor) (Acceptor, bool) { return a.OnAccept(b(1, "a"), v) }, true,
			Acceptor{Promised: b(1, "a"), AcceptedBallot: b(1, "a"), Accepted: v}},
		{"accept above promised", Acceptor{Promised: b(1, "a")}, func(a Acceptor) (Acceptor, bool) { return a.OnAccept(b(2, "a"), v) }, true,
			Acceptor{Promised: b(2, "a"), AcceptedBallot: b(2, "a"), Accepted: v}},
		{"accept below promised refused", Acceptor{Promised: b(2, "a"), AcceptedBallot: b(1, "a"), Accepted: v}, func(a Acceptor) (Acceptor, bool) { return a.OnAccept(b(1, "z"), w) }, false,
			Acceptor{Promised: b(2, "a"), AcceptedBallot: b(1, "a"), Accepted: v}},
		{"accept of a malformed value refused", Acceptor{}, func(a Acceptor) (Acceptor, bool) { return a.OnAccept(b(1, "a"), Value{founder("b"), founder("a")}) }, false, Acceptor{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, ok := c.op(c.a)
			if ok != c.wantOK || got.Promised != c.want.Promised || got.AcceptedBallot != c.want.AcceptedBallot || !got.Accepted.Equal(c.want.Accepted) {
				t.Fatalf("got %+v ok=%v, want %+v ok=%v", got, ok, c.want, c.wantOK)
			}
		})
	}
}

func TestChooseValue(t *testing.T) {
	v := NewValue(founders("a", "b", "c"))
	w := NewValue(founders("b", "d", "e"))
	ok := func(id string, seen Acceptor) Promise { return Promise{From: founder(id), OK: true, Seen: seen} }
	nack := func(id string) Promise { return Promise{From: founder(id)} }
	acc := func(r uint64, val Value) Acceptor {
		return Acceptor{Promised: Ballot{Round: 9}, AcceptedBallot: Ballot{Round: r, Proposer: "x"}, Accepted: val}
	}
	cases := []struct {
		name     string
		promises []Promise
		quorum   int
		own      func([]Founder) (Value, bool)
		want     Value
	}{
		{"no quorum", []Promise{ok("a", Acceptor{}), ok("b", Acceptor{}), nack("c")}, 3, ExpectValue(3), nil},
		{"duplicates count once", []Promise{ok("a", Acceptor{}), ok("a", Acceptor{}), ok("b", Acceptor{})}, 3, ExpectValue(3), nil},
		{"own value: smallest ids", []Promise{ok("e", Acceptor{}), ok("c", Acceptor{}), ok("a", Acceptor{}), ok("b", Acceptor{})}, 3, ExpectValue(3), v},
		{"accepted value wins over own", []Promise{ok("a", Acceptor{}), ok("b", acc(1, w)), ok("c", Acceptor{})}, 3, ExpectValue(3), w},
		{"highest accepted ballot wins", []Promise{ok("a", acc(2, v)), ok("b", acc(5, w)), ok("c", acc(3, v))}, 3, ExpectValue(3), w},
		{"accepted value of a nack is ignored", []Promise{ok("a", Acceptor{}), ok("b", Acceptor{}), ok("c", Acceptor{}), {From: founder("d"), Seen: acc(7, w)}}, 3, ExpectValue(3), v},
		{"own value impossible", []Promise{ok("a", Acceptor{}), ok("b", Acceptor{})}, 2, ExpectValue(3), nil},
		{"static: all promisers", []Promise{ok("c", Acceptor{}), ok("a", Acceptor{}), nack("b")}, 2, PeersValue, NewValue(founders("a", "c"))},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, ok := ChooseValue(c.promises, c.quorum, c.own)
			if ok != (c.want != nil) || !got.Equal(c.want) {
				t.Fatalf("got %v ok=%v, want %v", got, ok, c.want)
			}
		})
	}
}

func TestValue(t *testing.T) {
	v := NewValue(founders("c", "a", "b"))
	if v[0].ID != "a" || v[2].ID != "c" || v.Check() != nil {
		t.Fatalf("NewValue not canonical: %v (%v)", v, v.Check())
	}
	if !v.Names("b", "ib") || v.Names("b", "other") || v.Names("d", "id") {
		t.Fatal("Names")
	}
	w := NewValue([]Founder{{ID: "a", Addr: "a:7400", Incarnation: "other"}, founder("b"), founder("c")})
	if v.ClusterID() == w.ClusterID() || v.ClusterID() != NewValue(founders("a", "b", "c")).ClusterID() || len(v.ClusterID()) != 16 {
		t.Fatalf("ClusterID: %q %q", v.ClusterID(), w.ClusterID())
	}
	bad := []Value{
		nil,
		{founder("a"), founder("a")},
		{founder("a"), {ID: "b", Addr: "a:7400", Incarnation: "x"}},
		{{ID: "a", Addr: "a:7400"}},
		{founder("b"), founder("a")},
	}
	for _, b := range bad {
		if b.Check() == nil {
			t.Errorf("Check(%v) = nil", b)
		}
	}
	if got := NextBallot("b", Ballot{Round: 4, Proposer: "z"}, Ballot{Round: 2}); got != (Ballot{Round: 5, Proposer: "b"}) {
		t.Fatalf("NextBallot = %+v", got)
	}
}

// TestFormationNeverSplits drives acceptors and proposers through random
// schedules — partial visibility (partitions), lost, repeated and reordered
// messages, proposers that crash mid-ballot (acceptors persist their state)
// — and checks Paxos's promise: at most one value is ever chosen, and every
// founder that bootstraps uses it. The universe is 2N−1 nodes with
// BootstrapExpect = N (quorum N), or a static configuration (quorum a
// majority).
func TestFormationNeverSplits(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		static := rapid.Bool().Draw(t, "static")
		var ids []string
		var quorum int
		var own func([]Founder) (Value, bool)
		if static {
			n := rapid.IntRange(1, 5).Draw(t, "peers")
			for i := range n {
				ids = append(ids, fmt.Sprintf("n%d", i+1))
			}
			quorum, own = StaticQuorum(n), PeersValue
		} else {
			n := rapid.IntRange(1, 3).Draw(t, "expect")
			for i := range 2*n - 1 {
				ids = append(ids, fmt.Sprintf("n%d", i+1))
			}
			quorum, own = n, ExpectValue(n)
		}
		sim := newSim(ids, quorum, own)
		steps := rapid.IntRange(1, 200).Draw(t, "steps")
		for range steps {
			switch rapid.IntRange(0, 9).Draw(t, "action") {
			case 0: // a proposer starts a ballot, seeing a random subset
				p := rapid.SampledFrom(ids).Draw(t, "proposer")
				var visible []string
				for _, id := range ids {
					if id == p || rapid.Bool().Draw(t, "visible "+id) {
						visible = append(visible, id)
					}
				}
				sim.propose(p, visible)
			case 1: // a proposer crashes: its ballot in progress is forgotten
				delete(sim.proposers, rapid.SampledFrom(ids).Draw(t, "crash"))
			case 2: // a message is lost
				if len(sim.msgs) > 0 {
					i := rapid.IntRange(0, len(sim.msgs)-1).Draw(t, "drop")
					sim.msgs = slices.Delete(sim.msgs, i, i+1)
				}
			case 3: // a message is repeated
				if len(sim.msgs) > 0 {
					i := rapid.IntRange(0, len(sim.msgs)-1).Draw(t, "dup")
					sim.msgs = append(sim.msgs, sim.msgs[i])
				}
			default: // some message is delivered (any order)
				if len(sim.msgs) > 0 {
					sim.deliver(rapid.IntRange(0, len(sim.msgs)-1).Draw(t, "deliver"))
				}
			}
			if err := sim.check(); err != nil {
				t.Fatal(err)
			}
		}
	})
}

type simMsg struct {
	kind   string // prepare, promise, accept, accepted, decided
	from   string
	to     string
	ballot Ballot
	value  Value
	seen   Acceptor
	ok     bool
}

type simProposer struct {
	ballot   Ballot
	visible  []string
	promises []Promise
	value    Value
	accepted []string
	decided  bool
}

type sim struct {
	ids       []string
	quorum    int
	own       func([]Founder) (Value, bool)
	acceptors map[string]Acceptor // persisted: survives proposer crashes
	proposers map[string]*simProposer
	maxSeen   map[string]Ballot // per proposer: the highest ballot it has seen (persisted with the node)
	msgs      []simMsg
	// acceptedAt[ballot] = acceptors that accepted at that ballot (and what).
	acceptedAt   map[Ballot]map[string]Value
	bootstrapped map[string]Value
}

func newSim(ids []string, quorum int, own func([]Founder) (Value, bool)) *sim {
	s := &sim{ids: ids, quorum: quorum, own: own, acceptors: map[string]Acceptor{}, proposers: map[string]*simProposer{},
		maxSeen: map[string]Ballot{}, acceptedAt: map[Ballot]map[string]Value{}, bootstrapped: map[string]Value{}}
	return s
}

func (s *sim) propose(p string, visible []string) {
	seen := []Ballot{s.maxSeen[p], s.acceptors[p].Promised}
	b := NextBallot(p, seen...)
	s.maxSeen[p] = b
	s.proposers[p] = &simProposer{ballot: b, visible: visible}
	for _, to := range visible {
		s.msgs = append(s.msgs, simMsg{kind: "prepare", from: p, to: to, ballot: b})
	}
}

func (s *sim) deliver(i int) {
	m := s.msgs[i]
	s.msgs = slices.Delete(s.msgs, i, i+1)
	switch m.kind {
	case "prepare":
		next, ok := s.acceptors[m.to].OnPrepare(m.ballot)
		s.acceptors[m.to] = next
		s.msgs = append(s.msgs, simMsg{kind: "promise", from: m.to, to: m.from, ballot: m.ballot, ok: ok, seen: next})
	case "promise":
		if b := m.seen.Promised; b.Compare(s.maxSeen[m.to]) > 0 {
			s.maxSeen[m.to] = b
		}
		p := s.proposers[m.to]
		if p == nil || p.ballot != m.ballot || p.value != nil {
			return
		}
		p.promises = append(p.promises, Promise{From: founder(m.from), OK: m.ok, Seen: m.seen})
		if v, ok := ChooseValue(p.promises, s.quorum, s.own); ok {
			p.value = v
			for _, to := range p.visible {
				s.msgs = append(s.msgs, simMsg{kind: "accept", from: m.to, to: to, ballot: p.ballot, value: v})
			}
		}
	case "accept":
		next, ok := s.acceptors[m.to].OnAccept(m.ballot, m.value)
		s.acceptors[m.to] = next
		if ok {
			if s.acceptedAt[m.ballot] == nil {
				s.acceptedAt[m.ballot] = map[string]Value{}
			}
			s.acceptedAt[m.ballot][m.to] = m.value
		}
		s.msgs = append(s.msgs, simMsg{kind: "accepted", from: m.to, to: m.from, ballot: m.ballot, ok: ok, value: m.value})
	case "accepted":
		p := s.proposers[m.to]
		if p == nil || p.ballot != m.ballot || !m.ok || p.decided {
			return
		}
		p.accepted = append(p.accepted, m.from)
		if Chosen(p.accepted, s.quorum) {
			p.decided = true
			for _, f := range p.value {
				s.msgs = append(s.msgs, simMsg{kind: "decided", from: m.to, to: f.ID, ballot: p.ballot, value: p.value})
			}
		}
	case "decided":
		if m.value.Names(m.to, "i"+m.to) {
			if _, done := s.bootstrapped[m.to]; !done {
				s.bootstrapped[m.to] = m.value
			}
		}
	}
}

// check: at most one value is chosen (accepted by a quorum at one ballot),
// and every bootstrapped founder used it.
func (s *sim) check() error {
	var chosen Value
	for b, by := range s.acceptedAt {
		var ids []string
		var v Value
		for id, val := range by {
			ids = append(ids, id)
			if v != nil && !v.Equal(val) {
				return fmt.Errorf("ballot %+v accepted with two values", b)
			}
			v = val
		}
		if Chosen(ids, s.quorum) {
			if chosen != nil && !chosen.Equal(v) {
				return fmt.Errorf("two values chosen: %v and %v", chosen, v)
			}
			chosen = v
		}
	}
	for id, v := range s.bootstrapped {
		if chosen == nil || !v.Equal(chosen) {
			return fmt.Errorf("%s bootstrapped %v, chosen %v", id, v, chosen)
		}
	}
	return nil
}
