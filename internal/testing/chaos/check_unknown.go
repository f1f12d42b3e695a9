package chaos

import "slices"

// Acquisitions nobody knows are released (issue 45 item 5): an
// acquisition the log granted or queued whose owner no client ever
// learnt (its call failed, its answer was lost) must end — released,
// dequeued, its session ended, a restore — soon after its session's
// library can know that nobody waits for it (at the event, or when the
// call that waited for it returned without it):
//
//   - within 2.5 TTLs once its session's replica installed a snapshot
//     covering it (a resync: the library must then release whatever of
//     the session it does not know, every kind of grant and wait — read
//     grants and semaphore permits too; a session whose library is gone,
//     its replica restarted, has expired by then, a takeover's grace
//     included), counted from the first moment after that from which
//     nothing cuts that replica off or stops all commits for as long;
//   - or within 3 TTLs of the first moment after it from which no fault
//     is active for that long (the replica applied it, and the library
//     releases a grant it does not wait for; a session whose replica
//     stopped has expired by then).
//
// One that survives stays for the session's life (the ghost-holder check
// sees it at the end when that lasts).

// CheckUnknownHeld is the check's name.
const CheckUnknownHeld = "unknown-held" // an acquisition whose owner nobody knows ends once its session's replica can know

// freeFrom returns the first moment at or after t from which none of the
// faults that block matches is active for d.
func (c *checker) freeFrom(t, d int64, blocks func(f FaultEvent) bool) int64 {
	for moved := true; moved; {
		moved = false
		for _, f := range c.h.Nemesis {
			if blocks(f) && f.Start < t+d && f.End > t { // active within [t, t+d)
				t, moved = f.End, true
			}
		}
	}
	return t
}

// cutsOff reports whether fault f keeps replica node from committing: it
// is cut off, paused or down, no quorum exists, or the leader's or the
// followers' log appends stall (the disk class: nothing commits, not the
// expiry of a session whose library is gone either).
func cutsOff(f FaultEvent, node string) bool {
	switch {
	case f.Kind == "quorum-loss", f.Kind == "stall-leader-disk", f.Kind == "stall-follower-disks", slices.Contains(f.Cut, node):
		return true
	case f.Target == node:
		return f.Kind == "crash-restart" || f.Kind == "pause" || f.Kind == "sigstop"
	}
	return false
}

func (c *checker) checkUnknown() {
	if c.h.TTL == 0 || !c.h.Expect.ExactlyOnce || c.h.Layer == "multi-process" {
		return // the multi-process layer's HTTP clients never learn owner ids
	}
	known := map[string]bool{}
	nodeOf := map[uint64]string{} // session → the replica its client uses
	calls := map[uint64][]*Op{}   // session → its acquisitions
	for i := range c.h.Ops {
		op := &c.h.Ops[i]
		if op.Owner != "" && op.Result == Granted {
			known[op.Owner] = true
		}
		if op.Session != 0 {
			nodeOf[op.Session] = op.Node
			if op.Kind.acquires() {
				calls[op.Session] = append(calls[op.Session], op)
			}
		}
	}
	// unknownFrom is when the client stopped knowing the acquisition of
	// event e: when the call that was waiting for it (same session and
	// lock, in flight then) returned without it, else at e.
	unknownFrom := func(e LogEvent) int64 {
		from := c.decided(e)
		for _, op := range calls[e.Session] {
			if op.Lock == e.Lock && op.Invoke <= c.seen(e) && op.Return >= c.decided(e) {
				from = max(from, op.Return)
			}
		}
		return from
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
	type acq struct{ lock, owner string }
	var ends []int64 // restores end every acquisition
	for _, in := range c.installs {
		ends = append(ends, c.decided(c.log[in.pos]))
	}
	endsOf := map[acq][]int64{}
	for _, e := range c.log {
		if (e.Kind == EvReleased || e.Kind == EvDequeued) && e.Owner != "" {
			k := acq{e.Lock, e.Owner}
			endsOf[k] = append(endsOf[k], c.decided(e))
		}
	}
	whole, resync := 3*c.h.TTL, 2*c.h.TTL+c.h.TTL/2
	every := func(FaultEvent) bool { return true }
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
		from := unknownFrom(e)
		deadline := c.freeFrom(from, whole, every) + whole
		after := "the cluster was whole again"
		bound := whole
		if r := resynced(e.Session, e.Index); r != 0 {
			n := nodeOf[e.Session]
			if d := c.freeFrom(max(r, from), resync, func(f FaultEvent) bool { return cutsOff(f, n) }) + resync; d < deadline {
				deadline, bound, after = d, resync, "its replica "+n+" installed a snapshot covering it (and was not cut off)"
			}
		}
		if deadline > c.h.End {
			continue // the end state's ghost check judges it
		}
		if !slices.ContainsFunc(append(endsOf[k], ends...), func(t int64) bool { return t >= at && t <= deadline }) {
			what := "held"
			if e.Kind == EvQueued {
				what = "queued"
			}
			c.fail(CheckUnknownHeld, e.Lock, "owner %s of session %d, %s at index %d (token %d, shared %v, permits %d) and known to no client, still %s %s after %s",
				e.Owner, e.Session, what, e.Index, e.Token, e.Shared, e.Permits, what, durationMS(bound), after)
		}
	}
}
