package lockapi

import "sync"

// seqAlloc numbers a session's requests for exactly-once execution (see
// fsm's "Request numbers"): every command a session proposes carries the
// next number and the session's acknowledgement — the lowest number not yet
// finished — so that the cluster answers a duplicate delivery of a request
// with its original result, and refuses (StatusStale) one the session has
// already finished. Finishing a request it gave up on is what makes a
// delayed duplicate of it harmless: once acknowledged, it can never
// execute. Safe for concurrent use; the zero value is ready (numbers start
// at 1).
type seqAlloc struct {
	mu   sync.Mutex
	last uint64              // last number handed out
	low  uint64              // every number below it is done; the lowest open one is >= low
	open map[uint64]struct{} // handed out, not yet done
}

// next hands out the next request number; the caller must call done with
// it once the request is finished from its point of view.
func (a *seqAlloc) next() uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.open == nil {
		a.open = make(map[uint64]struct{})
	}
	a.last++
	a.open[a.last] = struct{}{}
	return a.last
}

// done marks request seq finished: answered, failed for good, or given up
// (any return of the propose call that carried it).
func (a *seqAlloc) done(seq uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.open, seq)
}

// ackBelow returns the lowest request number not yet finished (last+1 if
// none is open): every request below it is finished. O(1) amortised.
func (a *seqAlloc) ackBelow() uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.low = max(a.low, 1)
	for a.low <= a.last {
		if _, ok := a.open[a.low]; ok {
			break
		}
		a.low++
	}
	return a.low
}
