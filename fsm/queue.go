package fsm

import (
	"iter"
	"slices"
)

// indexThreshold is the queue length from which a queue keeps an index of
// its owners (owner → slot), so that finding or removing an owner (done by
// every Acquire for idempotency, every Release of a waiter, every session
// end) stays O(1) for long queues.
const indexThreshold = 16

// queue is a lock's FIFO wait queue. Removing a waiter leaves a tombstone (a
// slot with the zero owner, which is never valid); the slots are compacted
// once the dead outnumber the live, so that every removal costs O(1)
// amortised and a pass over the queue O(live).
type queue struct {
	items  []waiter        // items[head:] in FIFO order, tombstones included
	head   int             // slots before it were popped
	live   int             // waiters in the queue
	owners map[OwnerID]int // owner → slot in items; nil below indexThreshold
	// counts (with owners) are the waiters of each session and of each
	// node (the shares of the queue, fairshare.go).
	counts *queueCounts
}

type queueCounts struct {
	bySession map[SessionID]int
	byNode    map[string]int
}

// countOf returns how many waiters of session s, and of node, the queue
// holds: O(1) with the index, a pass over a short queue without.
func (q *queue) countOf(s SessionID, node string) (bySession, byNode int) {
	if q.owners != nil {
		return q.counts.bySession[s], q.counts.byNode[node]
	}
	for w := range q.all() {
		if w.session == s {
			bySession++
		}
		if w.node == node {
			byNode++
		}
	}
	return bySession, byNode
}

// count adds d to the index's counts of w.
func (q *queue) count(w waiter, d int) {
	c := q.counts
	if n := c.bySession[w.session] + d; n > 0 {
		c.bySession[w.session] = n
	} else {
		delete(c.bySession, w.session)
	}
	if n := c.byNode[w.node] + d; n > 0 {
		c.byNode[w.node] = n
	} else {
		delete(c.byNode, w.node)
	}
}

func (q *queue) len() int { return q.live }

// clone returns a compacted copy.
func (q *queue) clone() queue {
	if q.live == 0 {
		return queue{}
	}
	c := queue{items: make([]waiter, 0, q.live)}
	for w := range q.all() {
		c.items = append(c.items, w)
	}
	c.live = len(c.items)
	if q.owners != nil {
		c.buildIndex()
	}
	return c
}

// all iterates over the waiters in FIFO order.
func (q *queue) all() iter.Seq[waiter] {
	return func(yield func(waiter) bool) {
		for i := q.head; i < len(q.items); i++ {
			if !q.items[i].owner.IsZero() && !yield(q.items[i]) {
				return
			}
		}
	}
}

// find returns the slot of owner, or -1 if it does not wait.
func (q *queue) find(owner OwnerID) int {
	if q.owners != nil {
		if i, ok := q.owners[owner]; ok {
			return i
		}
		return -1
	}
	for i := q.head; i < len(q.items); i++ {
		if q.items[i].owner == owner {
			return i
		}
	}
	return -1
}

// at returns the waiter in slot i (from find).
func (q *queue) at(i int) waiter { return q.items[i] }

// position returns the 1-based place of owner, or 0 if it does not wait.
// O(place): it counts the live waiters ahead.
func (q *queue) position(owner OwnerID) int {
	i := q.find(owner)
	if i < 0 {
		return 0
	}
	p := 0
	for j := q.head; j <= i; j++ {
		if !q.items[j].owner.IsZero() {
			p++
		}
	}
	return p
}

// first returns the waiter at the front (the queue must not be empty).
func (q *queue) first() waiter {
	for q.items[q.head].owner.IsZero() {
		q.head++
	}
	return q.items[q.head]
}

func (q *queue) push(w waiter) {
	q.items = append(q.items, w)
	q.live++
	switch {
	case q.owners != nil:
		q.owners[w.owner] = len(q.items) - 1
		q.count(w, 1)
	case q.live >= indexThreshold:
		q.buildIndex()
	}
}

// popFront removes and returns the first waiter (the queue must not be
// empty).
func (q *queue) popFront() waiter {
	q.first() // skips the tombstones at the front
	return q.removeSlot(q.head)
}

// removeSlot removes and returns the waiter in slot i (from find).
func (q *queue) removeSlot(i int) waiter {
	w := q.items[i]
	q.items[i] = waiter{}
	q.live--
	if q.owners != nil {
		delete(q.owners, w.owner)
		q.count(w, -1)
	}
	if i == q.head {
		q.head++
	}
	q.tidy()
	return w
}

// tidy drops the tombstones once they outnumber the live waiters, shrinks
// an array much larger than the queue, and drops the index of a short queue.
func (q *queue) tidy() {
	if q.live == 0 {
		*q = queue{}
		return
	}
	if dead := len(q.items) - q.live; dead > q.live && dead >= 8 {
		items, inPlace := q.items[:0], true
		if cap(q.items) > 64 && cap(q.items) > 4*q.live {
			items, inPlace = make([]waiter, 0, 2*q.live), false
		}
		for i := q.head; i < len(q.items); i++ {
			if w := q.items[i]; !w.owner.IsZero() {
				items = append(items, w) // in place: never ahead of i
			}
		}
		if inPlace {
			clear(q.items[len(items):])
		}
		q.items, q.head = items, 0
		if q.owners != nil {
			q.buildIndex()
		}
	}
	if q.owners != nil && q.live < indexThreshold/2 {
		q.owners, q.counts = nil, nil
	}
}

// countNodes counts the waiters of each node afresh (the index's byNode,
// after the waiters' nodes were set).
func (q *queue) countNodes() {
	q.counts.byNode = make(map[string]int)
	for w := range q.all() {
		q.counts.byNode[w.node]++
	}
}

func (q *queue) buildIndex() {
	q.owners = make(map[OwnerID]int, 2*q.live)
	q.counts = &queueCounts{bySession: make(map[SessionID]int), byNode: make(map[string]int)}
	for i := q.head; i < len(q.items); i++ {
		if w := q.items[i]; !w.owner.IsZero() {
			q.owners[w.owner] = i
			q.count(w, 1)
		}
	}
}

// removeOwners removes the given waiters (owners that wait in this queue)
// in FIFO order, calling fn for each.
func (q *queue) removeOwners(owners []OwnerID, fn func(waiter)) {
	slots := make([]int, 0, len(owners))
	for _, o := range owners {
		if i := q.find(o); i >= 0 {
			slots = append(slots, i)
		}
	}
	slices.Sort(slots)
	// Take them out first (tidy may move slots), then report.
	removed := make([]waiter, len(slots))
	for k, i := range slots {
		removed[k] = q.items[i]
		q.items[i] = waiter{}
		q.live--
		if q.owners != nil {
			delete(q.owners, removed[k].owner)
			q.count(removed[k], -1)
		}
	}
	q.tidy()
	for _, w := range removed {
		fn(w)
	}
}
