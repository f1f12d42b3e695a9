package chaos

import "sort"

// window is a client validity window [from, to).
type window struct {
	from, to int64
	op       *Op
}

// checkValidity: windows of different holders of one lock are disjoint, and
// the log hands a lock on only after its holder's window closed — but for
// the operator exception (overlapAllowed): an operator's action ended
// the older grant first, and its window closed within a TTL of that.
// Shared-grant names are checkPrimitives'; the log's releases are checked
// for them too.
func (c *checker) checkValidity() {
	ends := c.operatorEnds()
	byLock := map[string][]window{}
	for i := range c.h.Ops {
		op := &c.h.Ops[i]
		if op.Result != Granted {
			continue
		}
		validTo := c.validTo[op.Token]
		to := validTo
		if to == 0 {
			to = max(c.h.End, op.Return)
		}
		if to > op.Return && !c.primitive(op.Lock) {
			byLock[op.Lock] = append(byLock[op.Lock], window{op.Return, to, op})
		}
		if r, ok := c.releaseOf[op.Token]; ok && validTo != 0 && c.decided(r) != infinity && c.decided(r)+c.o.ClockSlack < validTo {
			if e, byOperator := ends[op.Token]; !byOperator || c.log[e.pos] != r || validTo > e.at+c.h.TTL+c.o.ClockSlack {
				c.fail(CheckLeaseBeforeLog, op.Lock, "token %d (client %d): the log released it at index %d (%s, leader time %d) before the client's window closed at %d", op.Token, op.Client, r.Index, r.Reason, c.decided(r), validTo)
			}
		}
		if r, ok := c.releaseOf[op.Token]; ok && validTo == 0 && c.decided(r) < c.h.End {
			c.fail(CheckLeaseBeforeLog, op.Lock, "token %d (client %d): the log released it at index %d (%s) but the client's window never closed", op.Token, op.Client, r.Index, r.Reason)
		}
	}
	for l, ws := range byLock {
		sort.Slice(ws, func(i, j int) bool { return ws[i].from < ws[j].from })
		var open []*window // windows that began before, still open
		for i := range ws {
			w := &ws[i]
			still := open[:0]
			for _, o := range open {
				if o.to <= w.from {
					continue
				}
				still = append(still, o)
				if o.op.Token != w.op.Token && !c.overlapAllowed(ends, o.op.Token, w.op.Token, o.to) {
					c.fail(CheckValidity, l, "client %d held token %d during [%d, %d) while client %d held token %d during [%d, %d)",
						o.op.Client, o.op.Token, o.from, o.to, w.op.Client, w.op.Token, w.from, w.to)
				}
			}
			open = append(still, w)
		}
	}
}

// decided is when the log decided event e: its leader time, or, when the
// stamps do not follow the clients' clock, the earliest observation (an
// upper bound: a release seen before a window closed was decided before
// it); infinity when neither is known.
func (c *checker) decided(e LogEvent) int64 {
	switch {
	case !c.h.StampsUnreliable:
		return e.At
	case e.Observed != 0:
		return e.Observed
	}
	return infinity
}

// checkLeaseChecks: a replica never calls a lease valid once the log has
// ended it (committed before the question was asked). A truthful "valid"
// extends the client's validity window to the question.
func (c *checker) checkLeaseChecks() {
	c.validTo = map[uint64]int64{}
	c.staleChecks = map[int]bool{}
	for _, op := range c.h.Ops {
		if op.Result == Granted {
			c.validTo[op.Token] = op.ValidTo
		}
	}
	for _, op := range c.h.Ops {
		if op.Kind != OpLeaseCheck || op.Result != Valid {
			continue
		}
		if k, ok := c.pos[op.Token]; ok && c.hi[k] < op.Invoke {
			e := c.log[k]
			c.staleChecks[op.ID] = true
			c.fail(CheckStaleValidity, op.Lock, "client %d was told at %d that its lease (token %d) was valid, but the log had ended it by %d (index %d, %s)", op.Client, op.Invoke, op.Token, c.hi[k], e.Index, e.Reason)
			if c.known(CheckStaleValidity) {
				continue // known: keep it out of the windows and the model
			}
		}
		if v, ok := c.validTo[op.Token]; ok && v != 0 && op.Invoke > v {
			c.validTo[op.Token] = op.Invoke
		}
	}
}
