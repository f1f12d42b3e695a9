package lease

import (
	"fmt"
	"strings"
)

// The replay: the set of model states that agree with a run's steps so
// far (the run fixes most choices; what it leaves open — which keepalive
// an arrival is, whether a window ended before or after a step within
// their common tick — stays a choice, one state per answer), and the steps
// that advance it. A step that no state allows is a mismatch.

// replay is the model states a run may be in.
type replay struct {
	m     *model
	cands []State
	tick  int64 // the current tick (absolute: run time / tick length)
	steps int   // observed steps applied
	// viol is the property the last failed step broke in every state
	// that allowed it (nil: the step was not allowed at all).
	viol *Violation
}

// maxCands bounds the states a replay keeps (each choice the run leaves
// open doubles them at most; they merge again at the next tick).
const maxCands = 4096

// next applies f to every state and keeps the results: f calls emit for
// each state the step may lead to (none: the step is not allowed there).
// It reports whether any state allows it without breaking a property.
func (r *replay) next(f func(st *step, emit func(*step))) bool {
	seen := map[State]bool{}
	var out []State
	var viol *Violation
	for i := range r.cands {
		st := &step{m: r.m, s: r.cands[i]}
		f(st, func(x *step) {
			if x.disabled {
				return
			}
			if x.viol != nil {
				if viol == nil {
					viol = x.viol
				}
				return
			}
			r.m.normalize(&x.s)
			if !seen[x.s] && len(out) < maxCands {
				seen[x.s] = true
				out = append(out, x.s)
			}
		})
	}
	if len(out) == 0 {
		r.viol = viol
		return false
	}
	r.cands, r.viol = out, nil
	return true
}

// do applies one action to every state (those that do not allow it drop
// out) and reports whether any state allowed it.
func (r *replay) do(a Action) bool {
	return r.next(func(st *step, emit func(*step)) {
		x := *st
		if x.apply(a) {
			emit(&x)
		}
	})
}

// with applies f, a step of the replay's own (the run's log, a choice of
// the run), to a copy of every state; f reports whether it was allowed.
func (r *replay) with(f func(st *step) bool) bool {
	return r.next(func(st *step, emit func(*step)) {
		x := *st
		if f(&x) {
			emit(&x)
		}
	})
}

// keep drops the states that do not satisfy pred (an observation of the
// run: what it shows of the state) and reports whether any is left.
func (r *replay) keep(pred func(s *State) bool) bool {
	var out []State
	for i := range r.cands {
		if pred(&r.cands[i]) {
			out = append(out, r.cands[i])
		}
	}
	if len(out) == 0 {
		return false
	}
	r.cands = out
	return true
}

// orLapse is f, or f after client c's window ended within this tick (it
// was at its edge): the run does not say which came first.
func (r *replay) orLapse(c int, f func(st *step) bool) bool {
	return r.next(func(st *step, emit func(*step)) {
		x := *st
		if f(&x) {
			emit(&x)
		}
		y := *st
		if y.apply(Action{Kind: aLapse, C: uint8(c)}) && f(&y) {
			emit(&y)
		}
	})
}

// advance lets time pass to tick t. A client whose window reached 0 at
// the start of a tick lapses before the next one (its edge).
func (r *replay) advance(t int64) bool {
	for r.tick < t {
		ok := r.next(func(st *step, emit func(*step)) {
			x := *st
			for c := 0; c < r.m.n; c++ {
				if cl := &x.s.C[c]; cl.Kind != kindImmortal && cl.Phase == cOpen && cl.V == 0 {
					x.apply(Action{Kind: aLapse, C: uint8(c)})
				}
			}
			if x.apply(Action{Kind: aTick}) {
				emit(&x)
			}
		})
		if !ok {
			return false
		}
		r.tick++
	}
	return true
}

// describe summarises the states (at most a few).
func (r *replay) describe() string {
	var b strings.Builder
	for i := range r.cands {
		if i == 3 {
			fmt.Fprintf(&b, "\n      … and %d more", len(r.cands)-3)
			break
		}
		fmt.Fprintf(&b, "\n      %s", describe(&r.cands[i]))
	}
	return b.String()
}

// first returns one of the states (they agree on what the replay reads
// from it: the clients' request numbers, the lock's delay token).
func (r *replay) first() *State { return &r.cands[0] }
