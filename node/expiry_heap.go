package node

import (
	"container/heap"
	"time"
)

// timed is an item of a timeHeap: it knows when it is due and where in the
// heap it sits.
type timed interface {
	dueAt() time.Time
	setSlot(i int)
}

// timeHeap is a min-heap by due time: O(log n) to add, move or remove an
// item (by its slot), O(1) to see the earliest. Not safe for concurrent use.
type timeHeap[T timed] struct{ items []T }

func (h *timeHeap[T]) Len() int           { return len(h.items) }
func (h *timeHeap[T]) Less(i, j int) bool { return h.items[i].dueAt().Before(h.items[j].dueAt()) }
func (h *timeHeap[T]) Swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	h.items[i].setSlot(i)
	h.items[j].setSlot(j)
}
func (h *timeHeap[T]) Push(x any) {
	it := x.(T)
	it.setSlot(len(h.items))
	h.items = append(h.items, it)
}
func (h *timeHeap[T]) Pop() any {
	n := len(h.items) - 1
	it := h.items[n]
	var zero T
	h.items[n] = zero
	h.items = h.items[:n]
	it.setSlot(-1)
	return it
}

// add inserts it.
func (h *timeHeap[T]) add(it T) { heap.Push(h, it) }

// fix restores the order after the due time of the item in slot i changed.
func (h *timeHeap[T]) fix(i int) { heap.Fix(h, i) }

// remove takes out the item in slot i.
func (h *timeHeap[T]) remove(i int) { heap.Remove(h, i) }

// first returns the earliest item (false if empty).
func (h *timeHeap[T]) first() (T, bool) {
	if len(h.items) == 0 {
		var zero T
		return zero, false
	}
	return h.items[0], true
}

// init orders items built in bulk, O(n).
func (h *timeHeap[T]) init(items []T) {
	h.items = items
	for i, it := range items {
		it.setSlot(i)
	}
	heap.Init(h)
}
