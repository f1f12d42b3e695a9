package chaos

import "sort"

// Acquisitions nobody knows are released (issue 45 item 5): an
// acquisition the log granted or queued whose owner no client ever
// learnt (its call failed, its answer was lost) must end — released,
// dequeued, its session ended, a restore — within unknownBound of the
// moment its session's library could know of it: when the session's
// replica installed a snapshot that covers it (a resync: the library must
// then release whatever of the session it does not know, every kind of
// grant and wait — read grants and semaphore permits too), or else the
// first moment after its grant from which no fault is active for that
// long (the replica applied it; the library releases a grant it does not
// wait for). One that survives stays for the session's life (the
// ghost-holder check sees it at the end when that lasts).

// CheckUnknownHeld is the check's name.
const CheckUnknownHeld = "unknown-held" // an acquisition whose owner nobody knows ends once the cluster is whole

// unknownBound is how long after the cluster is whole an unknown
// acquisition may last: three of the longest session TTL (a session on a
// replica that stopped expires by then).
func (c *checker) unknownBound() int64 {
	return 3 * max(c.h.TTL, c.h.MaxTTL)
}

// wholeFrom returns the first moment at or after t from which no fault is
// active for d.
func (c *checker) wholeFrom(t, d int64) int64 {
	fs := append([]FaultEvent(nil), c.h.Nemesis...)
	sort.Slice(fs, func(i, j int) bool { return fs[i].Start < fs[j].Start })
	for moved := true; moved; {
		moved = false
		for _, f := range fs {
			if f.Start < t+d && f.End > t { // active within [t, t+d)
				t, moved = f.End, true
			}
		}
	}
	return t
}

func (c *checker) checkUnknown() {
	if c.h.TTL == 0 || !c.h.Expect.ExactlyOnce {
		return
	}
	known := map[string]bool{}
	for _, op := range c.h.Ops {
		if op.Owner != "" && op.Result == Granted {
			known[op.Owner] = true
		}
	}
	type acq struct{ lock, owner string }
	bound := c.unknownBound()
	var restores []int64
	for _, in := range c.installs {
		restores = append(restores, c.decided(c.log[in.pos]))
	}
	ends := map[acq][]int64{}
	for _, e := range c.log {
		if (e.Kind == EvReleased || e.Kind == EvDequeued) && e.Owner != "" {
			k := acq{e.Lock, e.Owner}
			ends[k] = append(ends[k], c.decided(e))
		}
	}
	nodeOf := map[uint64]string{} // session → the replica its client uses
	for _, op := range c.h.Ops {
		if op.Session != 0 {
			nodeOf[op.Session] = op.Node
		}
	}
	// resynced returns when the session's replica first installed a
	// snapshot covering index (0: never).
	resynced := func(session, index uint64) int64 {
		n, ok := nodeOf[session]
		if !ok {
			return 0
		}
		var first int64
		for _, r := range c.h.Resyncs {
			if r.Node == n && r.Index >= index && !r.Leading && (first == 0 || r.At < first) {
				first = r.At
			}
		}
		return first
	}
	checked := map[acq]bool{}
	for _, e := range c.log {
		if (e.Kind != EvGranted && e.Kind != EvQueued) || e.Owner == "" || known[e.Owner] {
			continue
		}
		k := acq{e.Lock, e.Owner}
		if checked[k] {
			continue
		}
		checked[k] = true
		at := c.decided(e)
		if at == infinity {
			continue
		}
		from := c.wholeFrom(at, bound)
		after := "the cluster was whole again"
		if r := resynced(e.Session, e.Index); r != 0 && r < from {
			from, after = r, "its replica "+nodeOf[e.Session]+" installed a snapshot covering it"
		}
		if from+bound > c.h.End {
			continue // the end state's ghost check judges it
		}
		deadline := from + bound
		ended := false
		for _, t := range append(ends[k], restores...) {
			if t >= at && t <= deadline {
				ended = true
				break
			}
		}
		if !ended {
			what := "held"
			if e.Kind == EvQueued {
				what = "queued"
			}
			c.fail(CheckUnknownHeld, e.Lock, "owner %s of session %d, %s at index %d (token %d, shared %v, permits %d) and known to no client, still %s %s after %s",
				e.Owner, e.Session, what, e.Index, e.Token, e.Shared, e.Permits, what, durationMS(bound), after)
		}
	}
}
