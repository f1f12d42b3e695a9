package fsm

import (
	"fmt"
	"sort"

	"github.com/raftlock/raftlock/internal/fsmwire"
)

// The exactly-once table of a session (see "Request numbers" in command.go):
// the ack floor and the results of the executed requests at or above it,
// sorted by request number. Requests mostly arrive in order, so recording
// one appends and raising the floor drops from the front: O(1) amortised,
// O(log n) lookups, at most Limits.RequestWindow results per session.
type executed struct {
	seq uint64
	res Result
}

// result returns the result of request seq, if it executed and is kept.
func (s *session) result(seq uint64) (Result, bool) {
	i := sort.Search(len(s.results), func(i int) bool { return s.results[i].seq >= seq })
	if i < len(s.results) && s.results[i].seq == seq {
		return s.results[i].res, true
	}
	return Result{}, false
}

// record keeps the result of request seq (not yet recorded, at or above the
// floor). s must be private to the current state (mutSession).
func (s *session) record(seq uint64, r Result) {
	n := len(s.results)
	if n == 0 || s.results[n-1].seq < seq {
		s.results = append(s.results, executed{seq, r})
		return
	}
	i := sort.Search(n, func(i int) bool { return s.results[i].seq >= seq })
	s.results = append(s.results, executed{})
	copy(s.results[i+1:], s.results[i:])
	s.results[i] = executed{seq, r}
}

// raiseFloor raises the ack floor to f (never lowers it) and drops the
// results below it. s must be private to the current state.
func (s *session) raiseFloor(f uint64) {
	if f <= s.floor {
		return
	}
	s.floor = f
	i := sort.Search(len(s.results), func(i int) bool { return s.results[i].seq >= f })
	if i > 0 {
		n := copy(s.results, s.results[i:])
		clear(s.results[n:])
		s.results = s.results[:n]
	}
	if len(s.results) == 0 {
		s.results = nil
	}
}

// once applies an exactly-once command: a duplicate gets its original
// result, a request below the ack floor is stale, one beyond the window is
// refused; otherwise the command executes and its result is kept. Nothing
// changes for a duplicate, a stale or a refused request.
func (a *applier) once(c Command, r request) Result {
	st := a.st
	s := st.sessions.get(r.session)
	switch {
	case s == nil:
		return Result{Status: fsmwire.StatusNoSession}
	case r.seq < s.floor:
		return Result{Status: fsmwire.StatusStale, Session: r.session}
	}
	if res, ok := s.result(r.seq); ok {
		return res
	}
	floor := max(s.floor, r.ackBelow)
	if w := st.limits.window(); r.seq-floor >= w {
		return quotaResult(fsmwire.QuotaRequests, "request %d of session %d is %d beyond its acknowledged floor %d (window %d)",
			r.seq, r.session, r.seq-floor, floor, w)
	}
	res := a.exec(c)
	if s := st.mutSession(r.session); s != nil { // nil after its own CloseSession
		s.raiseFloor(floor)
		s.record(r.seq, res)
	}
	return res
}

// validateResults checks a restored exactly-once table.
func (s *session) validateResults(window uint64) error {
	for i, e := range s.results {
		switch {
		case e.seq < s.floor || e.seq == 0:
			return fmt.Errorf("session %d: result of request %d below its floor %d", s.id, e.seq, s.floor)
		case i > 0 && e.seq <= s.results[i-1].seq:
			return fmt.Errorf("session %d: results out of order", s.id)
		}
	}
	if uint64(len(s.results)) > max(window, fsmwire.MaxRequestWindow) {
		return fmt.Errorf("session %d: %d results kept", s.id, len(s.results))
	}
	return nil
}
