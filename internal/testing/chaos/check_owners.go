package chaos

import "slices"

// Acquisitions in the log, from the cluster version on which exactly-once
// holds (History.Expect.ExactlyOnce; the log from its formation's second
// cluster-changed event, the version raise, on):
//
//   - exactly-once: an acquisition (lock, owner) is granted at most once,
//     and never after it ended (released, or dequeued: withdrawn or its
//     session ended). A delayed duplicate of an Acquire must not resurrect
//     it. (lockapi releases a grant nobody waits for at once, so neither
//     the end state nor porcupine would notice one.)
//   - FIFO: a waiter is never granted while a waiter queued before it on
//     the same lock still waits.
//
// Both read only the log. A queued event the log lacks makes its waiter
// unknown to the FIFO check, which then never flags on its account. A
// restore ends every acquisition and brings the backup's back
// (restoreMarkers).
func (c *checker) checkOwners() {
	if !c.h.Expect.ExactlyOnce {
		return
	}
	type acq struct{ lock, owner string }
	from, changed := -1, 0
	for i, e := range c.log {
		if e.Kind == "cluster-changed" {
			if changed++; changed == 2 {
				from = i + 1
				break
			}
		}
	}
	if from < 0 {
		return
	}
	granted := map[acq]LogEvent{}
	ended := map[acq]LogEvent{}
	queue := map[string][]string{}
	dequeue := func(lock, owner string) int {
		q := queue[lock]
		i := slices.Index(q, owner)
		if i >= 0 {
			queue[lock] = slices.Delete(q, i, i+1)
		}
		return i
	}
	for pos, e := range c.log[from:] {
		if e.Kind == EvRestored {
			// Whatever was held or queued ends; the backup's holds and
			// waits come back (a restored waiter may be granted again).
			for k, g := range granted {
				if _, gone := ended[k]; !gone {
					ended[k] = LogEvent{Index: e.Index, Kind: EvRestored, Lock: g.Lock, Owner: g.Owner}
				}
			}
			for l, q := range queue {
				for _, o := range q {
					ended[acq{l, o}] = LogEvent{Index: e.Index, Kind: EvRestored, Lock: l, Owner: o}
				}
			}
			clear(queue)
			for _, r := range c.installAt[from+pos].restoredHolds() {
				k := acq{r.Lock, r.Owner}
				delete(ended, k)
				if r.Waiter {
					delete(granted, k)
					queue[r.Lock] = append(queue[r.Lock], r.Owner)
				} else {
					granted[k] = LogEvent{Index: e.Index, Kind: EvRestored, Lock: r.Lock, Owner: r.Owner, Token: r.Token}
				}
			}
			continue
		}
		if e.Owner == "" || e.Lock == "" {
			continue
		}
		k := acq{e.Lock, e.Owner}
		switch e.Kind {
		case EvQueued:
			queue[e.Lock] = append(queue[e.Lock], e.Owner)
		case EvDequeued:
			dequeue(e.Lock, e.Owner)
			ended[k] = e
		case EvReleased:
			ended[k] = e
		case EvGranted:
			if g, dup := granted[k]; dup {
				c.fail(CheckExactlyOnce, e.Lock, "owner %s granted again at index %d (token %d); it was granted at index %d (token %d)", e.Owner, e.Index, e.Token, g.Index, g.Token)
			} else if x, gone := ended[k]; gone {
				c.fail(CheckExactlyOnce, e.Lock, "owner %s granted at index %d (token %d) after its acquisition ended at index %d (%s %s)", e.Owner, e.Index, e.Token, x.Index, x.Kind, x.Reason)
			}
			granted[k] = e
			if ahead := queue[e.Lock]; dequeue(e.Lock, e.Owner) > 0 {
				c.fail(CheckFIFO, e.Lock, "index %d grants owner %s (token %d) while %s, queued before it, still waits", e.Index, e.Owner, e.Token, ahead[0])
			}
		}
	}
}
