package lease

import (
	"errors"
	"fmt"
	"hash/maphash"
	"time"
)

// Result is the outcome of one exhaustive check.
type Result struct {
	Config      string
	States      int   // distinct states reached
	Transitions int64 // steps explored
	Depth       int   // the longest shortest path (BFS levels)
	Elapsed     time.Duration
	Complete    bool // every reachable state was explored (no Bounds.MaxStates cut)

	// The worst delays found in reachable states (Timely configurations):
	// ticks a live session went unheard (P4), ticks the lock had a waiter
	// and no holder (liveness).
	WorstSilent, WorstWait int

	Violation *Violation
	Trace     []TraceStep // the shortest schedule that reaches the violation
}

// Verdict returns the property the check found broken ("" when every
// property holds).
func (r *Result) Verdict() string {
	if r.Violation == nil {
		return ""
	}
	return r.Violation.Prop
}

// TraceStep is one step of a counterexample: the action, the real time
// (ticks) after it, and the state it led to.
type TraceStep struct {
	Action Action
	Time   int
	State  State
}

// errStateLimit: a check stopped at Bounds.MaxStates.
var errStateLimit = errors.New("lease: state limit reached")

// Check explores every state reachable in cfg, breadth first, and returns
// the first violation found (on a shortest schedule) or the state counts
// of a complete exploration. States are stored as 64-bit fingerprints
// (hash compaction, as TLC does): two distinct states share one with
// probability about n²/2⁶⁵ for n states (below 10⁻⁵ at 10⁷ states).
func Check(cfg Config) (*Result, error) {
	m, err := newModel(cfg)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	r := &Result{Config: cfg.Name}
	e := explorer{m: m, seed: maphash.MakeSeed(), seen: newFingerprints(1 << 16)}
	init := m.initial()
	var frontier []node
	for i, s := range init {
		if e.add(&s, noParent, Action{Arg: uint8(i)}) {
			frontier = append(frontier, node{s: s, id: uint32(len(e.parent) - 1)})
		}
	}
	var viol *Violation
	var violAt uint32
	var violAct Action
	for len(frontier) > 0 && viol == nil {
		var next []node
		for i := range frontier {
			nd := &frontier[i]
			e.observe(&nd.s, r)
			m.successors(&nd.s, func(a Action, t *State, v *Violation) {
				r.Transitions++
				if viol != nil {
					return
				}
				if v != nil {
					viol, violAt, violAct = v, nd.id, a
					return
				}
				if e.add(t, nd.id, a) {
					next = append(next, node{s: *t, id: uint32(len(e.parent) - 1)})
				}
			})
			if viol != nil {
				break
			}
			if cfg.Bounds.MaxStates > 0 && len(e.parent) > cfg.Bounds.MaxStates {
				r.States, r.Elapsed = len(e.parent), time.Since(start)
				return r, fmt.Errorf("%w: %d states in %s", errStateLimit, r.States, cfg.Name)
			}
		}
		if len(next) > 0 {
			r.Depth++
		}
		frontier = next
	}
	r.States, r.Elapsed = len(e.parent), time.Since(start)
	if viol != nil {
		r.Violation = viol
		r.Trace = e.trace(init, violAt, violAct)
		return r, nil
	}
	r.Complete = true
	return r, nil
}

type node struct {
	s  State
	id uint32
}

const noParent = ^uint32(0)

// explorer holds the visited states: a fingerprint set, and for each state
// its parent and the action that reached it first (for schedules).
type explorer struct {
	m      *model
	seed   maphash.Seed
	seen   *fingerprints
	parent []uint32
	act    []Action
}

func (e *explorer) add(s *State, parent uint32, a Action) bool {
	if !e.seen.insert(maphash.Comparable(e.seed, *s)) {
		return false
	}
	e.parent = append(e.parent, parent)
	e.act = append(e.act, a)
	return true
}

// observe records the delays P4 and liveness bound.
func (e *explorer) observe(s *State, r *Result) {
	if e.m.p4 == 0 {
		return
	}
	for c := 0; c < e.m.n; c++ {
		if s.F.Alive[c] && s.C[c].Kind != kindImmortal {
			r.WorstSilent = max(r.WorstSilent, int(s.C[c].Silent))
		}
	}
	r.WorstWait = max(r.WorstWait, int(s.M.Wait))
}

// trace rebuilds the schedule to the state id and its step a, by replaying
// the recorded actions from the initial state.
func (e *explorer) trace(init []State, id uint32, last Action) []TraceStep {
	var acts []Action
	root := id
	for e.parent[root] != noParent {
		acts = append(acts, e.act[root])
		root = e.parent[root]
	}
	s := init[e.act[root].Arg]
	for i, j := 0, len(acts)-1; i < j; i, j = i+1, j-1 {
		acts[i], acts[j] = acts[j], acts[i]
	}
	acts = append(acts, last)
	out := []TraceStep{{Action: Action{}, State: s}}
	now := 0
	for _, a := range acts {
		st := step{m: e.m, s: s}
		if !st.apply(a) {
			panic(fmt.Sprintf("lease: replay of %v failed", a))
		}
		e.m.normalize(&st.s)
		s = st.s
		if a.Kind == aTick {
			now++
		}
		out = append(out, TraceStep{Action: a, Time: now, State: s})
	}
	return out
}

// fingerprints is an open-addressing set of 64-bit state fingerprints.
type fingerprints struct {
	slots []uint64
	n     int
}

func newFingerprints(size int) *fingerprints { return &fingerprints{slots: make([]uint64, size)} }

// insert adds h and reports whether it was new.
func (f *fingerprints) insert(h uint64) bool {
	if h == 0 {
		h = 1 // 0 marks an empty slot
	}
	if 2*(f.n+1) > len(f.slots) {
		f.grow()
	}
	mask := uint64(len(f.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		switch f.slots[i] {
		case 0:
			f.slots[i] = h
			f.n++
			return true
		case h:
			return false
		}
	}
}

func (f *fingerprints) grow() {
	old := f.slots
	f.slots = make([]uint64, 2*len(old))
	f.n = 0
	for _, h := range old {
		if h != 0 {
			f.insert(h)
		}
	}
}
