package chaos

import "sort"

// checkWrites: the fencing checks on the register.
func (c *checker) checkWrites() {
	c.r.Writes = len(c.h.Writes)
	type key struct {
		lock  string
		token uint64
		value string
	}
	attempted := map[key]*Write{}
	for i := range c.h.Writes {
		w := &c.h.Writes[i]
		attempted[key{w.Lock, w.Token, w.Value}] = w
		if w.Accepted {
			c.r.WritesAccepted++
		}
		if w.Rejected {
			c.r.StaleRejected++
		}
		if g, ok := c.grantByToken[w.Token]; !ok || g.Lock != w.Lock {
			c.fail(CheckFenceToken, w.Lock, "write %q carries token %d, which is no grant of %s in the log (%+v)", w.Value, w.Token, w.Lock, g)
		}
	}
	// The final state: acknowledged writes present, nothing else, tokens
	// non-decreasing per resource.
	present := map[key]bool{}
	locks := make([]string, 0, len(c.h.Final))
	for l := range c.h.Final {
		locks = append(locks, l)
	}
	sort.Strings(locks)
	for _, l := range locks {
		var prev uint64
		for i, v := range c.h.Final[l] {
			k := key{l, v.Token, v.Value}
			present[k] = true
			if v.Token < prev {
				c.fail(CheckFenceOrder, l, "version %d has token %d after token %d", i, v.Token, prev)
			}
			prev = max(prev, v.Token)
			w := attempted[k]
			switch {
			case w == nil:
				c.fail(CheckPhantomWrite, l, "the final state holds %q (token %d), which nobody wrote", v.Value, v.Token)
			case w.Rejected:
				c.fail(CheckPhantomWrite, l, "the final state holds %q (token %d), whose write was rejected", v.Value, v.Token)
			}
		}
	}
	for _, w := range c.h.Writes {
		if w.Accepted && !present[key{w.Lock, w.Token, w.Value}] {
			c.r.AckLost++
			c.fail(CheckAckWrite, w.Lock, "write %q (token %d) was acknowledged but is missing from the final state", w.Value, w.Token)
		}
	}
	// Replay in the fence's own order where it is known; otherwise a
	// rejected write needs a higher token accepted before it returned.
	byLock := map[string][]*Write{}
	for i := range c.h.Writes {
		w := &c.h.Writes[i]
		byLock[w.Lock] = append(byLock[w.Lock], w)
	}
	for l, ws := range byLock {
		sequenced := true
		for _, w := range ws {
			sequenced = sequenced && w.Seq > 0
		}
		if sequenced {
			sort.Slice(ws, func(i, j int) bool { return ws[i].Seq < ws[j].Seq })
			var highest uint64
			for _, w := range ws {
				switch {
				case w.Accepted && w.Token < highest:
					c.fail(CheckStaleAccepted, l, "write %q with token %d accepted after token %d", w.Value, w.Token, highest)
				case w.Rejected && w.Token >= highest:
					c.fail(CheckFalseReject, l, "write %q with token %d rejected; highest accepted was %d", w.Value, w.Token, highest)
				}
				if w.Accepted {
					highest = max(highest, w.Token)
				}
			}
			continue
		}
		for _, w := range ws {
			if !w.Rejected {
				continue
			}
			justified := false
			for _, a := range ws {
				if a.Accepted && a.Token > w.Token && a.Invoke <= w.Return {
					justified = true
					break
				}
			}
			if !justified {
				c.fail(CheckFalseReject, l, "write %q with token %d rejected without a higher token accepted before", w.Value, w.Token)
			}
		}
	}
	// Late writes and unfenced overlaps: a write attempted after its
	// writer's window closed, once a newer grant of the lock was known
	// committed — only the fence stands between it and the newer holder.
	for _, w := range c.h.Writes {
		op := c.opGrant[w.Token]
		if op == nil || c.validTo[w.Token] == 0 || w.Invoke < c.validTo[w.Token] {
			continue
		}
		c.r.LateWrites++
		for t, g := range c.grantByToken {
			if g.Lock != w.Lock || t <= w.Token {
				continue
			}
			known := g.Observed != 0 && g.Observed <= w.Invoke
			if o := c.opGrant[t]; o != nil && o.Return <= w.Invoke {
				known = true
			}
			if known {
				c.r.UnfencedOverlaps++
				break
			}
		}
	}
}
