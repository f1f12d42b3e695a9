package fsm

import (
	"maps"
	"slices"
)

// indexThreshold is the queue length from which a queue keeps a set of its
// owners, so that checking whether an owner already waits (done by every
// Acquire, for idempotency) stays O(1) for long queues.
const indexThreshold = 16

// queue is a lock's FIFO wait queue.
type queue struct {
	items  []waiter
	owners map[OwnerID]struct{} // nil below indexThreshold
}

func (q *queue) len() int { return len(q.items) }

func (q *queue) clone() queue {
	return queue{items: slices.Clone(q.items), owners: maps.Clone(q.owners)}
}

// position returns the 1-based place of owner, or 0 if it does not wait.
func (q *queue) position(owner OwnerID) int {
	if q.owners != nil {
		if _, ok := q.owners[owner]; !ok {
			return 0
		}
	}
	for i := range q.items {
		if q.items[i].owner == owner {
			return i + 1
		}
	}
	return 0
}

func (q *queue) push(w waiter) {
	q.items = append(q.items, w)
	switch {
	case q.owners != nil:
		q.owners[w.owner] = struct{}{}
	case len(q.items) >= indexThreshold:
		q.owners = make(map[OwnerID]struct{}, 2*len(q.items))
		for _, w := range q.items {
			q.owners[w.owner] = struct{}{}
		}
	}
}

// popFront removes and returns the first waiter. O(1): the array's dead
// prefix is dropped when push next grows it.
func (q *queue) popFront() waiter {
	w := q.items[0]
	q.items = q.items[1:]
	q.forget(w.owner)
	return w
}

// removeAt removes and returns the waiter at index i (0-based).
func (q *queue) removeAt(i int) waiter {
	w := q.items[i]
	q.items = slices.Delete(q.items, i, i+1)
	q.forget(w.owner)
	return w
}

// removeSession removes every waiter of session s, in order, calling fn for each.
func (q *queue) removeSession(s SessionID, fn func(waiter)) {
	kept := q.items[:0]
	for _, w := range q.items {
		if w.session == s {
			q.forget(w.owner)
			fn(w)
			continue
		}
		kept = append(kept, w)
	}
	clear(q.items[len(kept):])
	q.items = kept
	q.forget(OwnerID{})
}

// forget drops owner from the index, and the index (and the array of an
// empty queue) once the queue is short again.
func (q *queue) forget(owner OwnerID) {
	if q.owners != nil {
		delete(q.owners, owner)
		if len(q.items) < indexThreshold/2 {
			q.owners = nil
		}
	}
	if len(q.items) == 0 {
		q.items = nil
	}
}
