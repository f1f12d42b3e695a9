package node

import (
	"container/heap"
	"context"
	"sync"
)

// appliedIndex tracks the local FSM's applied index and wakes those waiting
// for it to reach an index (read-your-writes, linearizable reads).
type appliedIndex struct {
	mu      sync.Mutex
	index   uint64
	waiters waitHeap
}

type indexWaiter struct {
	index uint64
	ch    chan struct{}
}

type waitHeap []indexWaiter

func (h waitHeap) Len() int           { return len(h) }
func (h waitHeap) Less(i, j int) bool { return h[i].index < h[j].index }
func (h waitHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *waitHeap) Push(x any)        { *h = append(*h, x.(indexWaiter)) }
func (h *waitHeap) Pop() any {
	old := *h
	w := old[len(old)-1]
	*h = old[:len(old)-1]
	return w
}

func (a *appliedIndex) get() uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.index
}

// advance records that index has been applied and wakes its waiters.
func (a *appliedIndex) advance(index uint64) {
	a.mu.Lock()
	if index > a.index {
		a.index = index
	}
	for len(a.waiters) > 0 && a.waiters[0].index <= a.index {
		close(heap.Pop(&a.waiters).(indexWaiter).ch)
	}
	a.mu.Unlock()
}

// wait returns once index has been applied locally, or ctx's error.
func (a *appliedIndex) wait(ctx context.Context, index uint64) error {
	a.mu.Lock()
	if a.index >= index {
		a.mu.Unlock()
		return nil
	}
	ch := make(chan struct{})
	heap.Push(&a.waiters, indexWaiter{index: index, ch: ch})
	a.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err() // the waiter stays in the heap until the index passes: harmless
	}
}
