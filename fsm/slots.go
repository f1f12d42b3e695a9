package fsm

import (
	"iter"
	"slices"
	"sort"

	"github.com/raftlock/raftlock/internal/lockinfo"
)

// indexThreshold is the length from which a slots list keeps an index of
// its owners (owner → slot), so that finding or removing an owner (done by
// every Acquire for idempotency, every Release, every session end) stays
// O(1) for long lists.
const indexThreshold = 16

// slots is an ordered list of one lock's acquisitions: its FIFO queue of
// waiters (queue), or its shared grants in grant order (grants). Items
// join at the end, and the key they are ordered by (a waiter's enqueue
// index, a grant's token) never decreases along the list. Removing an item
// leaves a tombstone (a slot with the zero owner, which is never valid,
// and the key of the item it replaced); the slots are compacted once the
// dead outnumber the live, so that every removal costs O(1) amortised and
// a pass over the list O(live). Tombstones keeping their keys, the slots
// from head on stay in key order: a listing finds its place by binary
// search (slotAfter).
type slots[T any, P slot[T]] struct {
	items  []T                      // items[head:] in order, tombstones included
	head   int                      // slots before it were popped
	live   int                      // items in the list
	owners map[lockinfo.OwnerID]int // owner → slot in items; nil below indexThreshold
	// counts (with owners, in a queue) are the waiters of each session and
	// of each node (the shares of the queue, fairshare.go).
	counts *queueCounts
}

// slot is what slots needs of an item.
type slot[T any] interface {
	*T
	slotOwner() lockinfo.OwnerID     // the zero owner: a tombstone
	slotKey() uint64                 // never decreases along a list
	slotSession() lockinfo.SessionID // the item's session
	slotNode() string                // its session's node (waiters; "" for grants)
	vacate()                         // make the item a tombstone: zero owner, same key
	counted() bool                   // whether the index counts items by session and node (a queue's shares)
}

type queueCounts struct {
	bySession map[lockinfo.SessionID]int
	byNode    map[string]int
}

// add adds d to the counts of an item of session s and node.
func (c *queueCounts) add(s lockinfo.SessionID, node string, d int) {
	if n := c.bySession[s] + d; n > 0 {
		c.bySession[s] = n
	} else {
		delete(c.bySession, s)
	}
	if n := c.byNode[node] + d; n > 0 {
		c.byNode[node] = n
	} else {
		delete(c.byNode, node)
	}
}

// queue is a lock's FIFO wait queue.
type queue = slots[waiter, *waiter]

// grants are the shared grants of a lock (its readers, or the holders of a
// semaphore's permits) in grant order: every grant takes a token above
// every other.
type grants = slots[holder, *holder]

func (w *waiter) slotOwner() lockinfo.OwnerID     { return w.owner }
func (w *waiter) slotKey() uint64                 { return w.enqueuedIx }
func (w *waiter) slotSession() lockinfo.SessionID { return w.session }
func (w *waiter) slotNode() string                { return w.node }
func (w *waiter) vacate()                         { *w = waiter{enqueuedIx: w.enqueuedIx} }
func (*waiter) counted() bool                     { return true }

func (h *holder) slotOwner() lockinfo.OwnerID     { return h.owner }
func (h *holder) slotKey() uint64                 { return h.token }
func (h *holder) slotSession() lockinfo.SessionID { return h.session }
func (h *holder) slotNode() string                { return "" }
func (h *holder) vacate()                         { *h = holder{token: h.token} }
func (*holder) counted() bool                     { return false }

// count adds d to the index's counts of the item in slot i (a queue with
// an index).
func (q *slots[T, P]) count(i int, d int) {
	if q.counts != nil {
		it := P(&q.items[i])
		q.counts.add(it.slotSession(), it.slotNode(), d)
	}
}

// countOf returns how many items of session s, and of node, the list
// holds: O(1) with the index (a queue), a pass over the list without.
func (q *slots[T, P]) countOf(s lockinfo.SessionID, node string) (bySession, byNode int) {
	if q.counts != nil {
		return q.counts.bySession[s], q.counts.byNode[node]
	}
	for i := q.head; i < len(q.items); i++ {
		if it := P(&q.items[i]); !it.slotOwner().IsZero() {
			if it.slotSession() == s {
				bySession++
			}
			if it.slotNode() == node {
				byNode++
			}
		}
	}
	return bySession, byNode
}

// countNodes counts the items of each node afresh (the index's byNode,
// after the waiters' nodes were set).
func (q *slots[T, P]) countNodes() {
	q.counts.byNode = make(map[string]int)
	for i := q.head; i < len(q.items); i++ {
		if it := P(&q.items[i]); !it.slotOwner().IsZero() {
			q.counts.byNode[it.slotNode()]++
		}
	}
}

// len, all, find and lookup also read a nil list (a lock without shared
// grants has none).

func (q *slots[T, P]) len() int {
	if q == nil {
		return 0
	}
	return q.live
}

// ownerOf returns the owner in slot i (zero: a tombstone).
func (q *slots[T, P]) ownerOf(i int) lockinfo.OwnerID { return P(&q.items[i]).slotOwner() }

// clone returns a compacted copy.
func (q *slots[T, P]) clone() slots[T, P] {
	if q.live == 0 {
		return slots[T, P]{}
	}
	c := slots[T, P]{items: make([]T, 0, q.live)}
	for w := range q.all() {
		c.items = append(c.items, w)
	}
	c.live = len(c.items)
	if q.owners != nil {
		c.buildIndex()
	}
	return c
}

// all iterates over the items in order.
func (q *slots[T, P]) all() iter.Seq[T] {
	return func(yield func(T) bool) {
		if q == nil {
			return
		}
		for i := q.head; i < len(q.items); i++ {
			if !q.ownerOf(i).IsZero() && !yield(q.items[i]) {
				return
			}
		}
	}
}

// find returns the slot of owner, or -1 if it is not in the list.
func (q *slots[T, P]) find(owner lockinfo.OwnerID) int {
	if q == nil {
		return -1
	}
	if q.owners != nil {
		if i, ok := q.owners[owner]; ok {
			return i
		}
		return -1
	}
	for i := q.head; i < len(q.items); i++ {
		if q.ownerOf(i) == owner {
			return i
		}
	}
	return -1
}

// at returns the item in slot i (from find).
func (q *slots[T, P]) at(i int) T { return q.items[i] }

// lookup returns owner's item, if it is in the list.
func (q *slots[T, P]) lookup(owner lockinfo.OwnerID) (T, bool) {
	if i := q.find(owner); i >= 0 {
		return q.items[i], true
	}
	var zero T
	return zero, false
}

// position returns the 1-based place of owner, or 0 if it is not in the
// list. O(place): it counts the live items ahead.
func (q *slots[T, P]) position(owner lockinfo.OwnerID) int {
	i := q.find(owner)
	if i < 0 {
		return 0
	}
	p := 0
	for j := q.head; j <= i; j++ {
		if !q.ownerOf(j).IsZero() {
			p++
		}
	}
	return p
}

// first returns the item at the front (the list must not be empty).
func (q *slots[T, P]) first() T {
	for q.ownerOf(q.head).IsZero() {
		q.head++
	}
	return q.items[q.head]
}

// push appends w, whose key is at least every key in the list. (Items are
// reached through their slots, never through a pointer to a copy: that
// would move the copy to the heap.)
func (q *slots[T, P]) push(w T) {
	q.items = append(q.items, w)
	q.live++
	switch {
	case q.owners != nil:
		q.owners[q.ownerOf(len(q.items)-1)] = len(q.items) - 1
		q.count(len(q.items)-1, 1)
	case q.live >= indexThreshold:
		q.buildIndex()
	}
}

// popFront removes and returns the first item (the list must not be
// empty).
func (q *slots[T, P]) popFront() T {
	q.first() // skips the tombstones at the front
	return q.removeSlot(q.head)
}

// removeSlot removes and returns the item in slot i (from find).
func (q *slots[T, P]) removeSlot(i int) T {
	w, o := q.items[i], q.ownerOf(i)
	if q.owners != nil {
		delete(q.owners, o)
		q.count(i, -1)
	}
	P(&q.items[i]).vacate()
	q.live--
	if i == q.head {
		q.head++
	}
	q.tidy()
	return w
}

// tidy drops the tombstones once they outnumber the live items, shrinks
// an array much larger than the list, and drops the index of a short list.
func (q *slots[T, P]) tidy() {
	if q.live == 0 {
		*q = slots[T, P]{}
		return
	}
	if dead := len(q.items) - q.live; dead > q.live && dead >= 8 {
		items, inPlace := q.items[:0], true
		if cap(q.items) > 64 && cap(q.items) > 4*q.live {
			items, inPlace = make([]T, 0, 2*q.live), false
		}
		for i := q.head; i < len(q.items); i++ {
			if !q.ownerOf(i).IsZero() {
				items = append(items, q.items[i]) // in place: never ahead of i
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

func (q *slots[T, P]) buildIndex() {
	q.owners = make(map[lockinfo.OwnerID]int, 2*q.live)
	q.counts = nil
	if P.counted(nil) {
		q.counts = &queueCounts{bySession: make(map[lockinfo.SessionID]int), byNode: make(map[string]int)}
	}
	for i := q.head; i < len(q.items); i++ {
		if o := q.ownerOf(i); !o.IsZero() {
			q.owners[o] = i
			q.count(i, 1)
		}
	}
}

// removeOwners removes the given owners' items (owners in the list) in
// order, calling fn for each.
func (q *slots[T, P]) removeOwners(owners []lockinfo.OwnerID, fn func(T)) {
	slots := make([]int, 0, len(owners))
	for _, o := range owners {
		if i := q.find(o); i >= 0 {
			slots = append(slots, i)
		}
	}
	slices.Sort(slots)
	// Take them out first (tidy may move slots), then report.
	removed := make([]T, len(slots))
	for k, i := range slots {
		removed[k] = q.items[i]
		if q.owners != nil {
			delete(q.owners, q.ownerOf(i))
			q.count(i, -1)
		}
		P(&q.items[i]).vacate()
		q.live--
	}
	q.tidy()
	for _, w := range removed {
		fn(w)
	}
}

// withKey returns the first live item of key, if there is one: O(log n)
// plus the items of that key.
func (q *slots[T, P]) withKey(key uint64) (T, bool) {
	for i := q.firstAtKey(key); i < len(q.items) && P(&q.items[i]).slotKey() == key; i++ {
		if !q.ownerOf(i).IsZero() {
			return q.items[i], true
		}
	}
	var zero T
	return zero, false
}

// firstAtKey returns the first slot (from head) whose key is key or above.
func (q *slots[T, P]) firstAtKey(key uint64) int {
	tail := q.items[q.head:]
	return q.head + sort.Search(len(tail), func(j int) bool { return P(&tail[j]).slotKey() >= key })
}

// slotAfter returns the slot a listing continues from after the item of
// key and owner tag (ownerTag) that ended its previous page: the slot after
// that item if it is still in the list, otherwise the first slot of key or
// above (ahead of it, every key is lower). O(log n) plus the items of that
// key (waiters enqueued by one log entry; a grant's token is its own).
func (q *slots[T, P]) slotAfter(key, tag uint64) int {
	i := q.firstAtKey(key)
	for j := i; j < len(q.items) && P(&q.items[j]).slotKey() == key; j++ {
		if o := q.ownerOf(j); !o.IsZero() && ownerTag(o) == tag {
			return j + 1
		}
	}
	return i
}
