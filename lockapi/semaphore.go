package lockapi

import (
	"context"

	"github.com/raftlock/raftlock/fsm"
)

// Semaphore names a counting semaphore of Limit permits (1 to
// fsm.MaxSemaphoreLimit). The limit is part of the replicated state: the
// first acquisition fixes it while the semaphore is in use (held or waited
// for), and an acquisition with another limit fails with a *ConflictError
// (Consul's contenders must agree on the limit, too). Once nobody holds or
// waits for it the semaphore is forgotten, and the next acquisition may
// choose another limit. A name is a lock or a semaphore, not both at once.
//
// Permits are granted in FIFO order, weighted: a request for n permits at
// the head of the queue waits until n are free, and requests behind it wait
// too, even if they would fit — large requests are never starved by small
// ones. Every grant has its own fencing token (the next of the grant
// counter, shared with locks). A grant's permits return when it is
// released, or at once when its session ends (closed or expired): they are
// never left dangling, and no lock-delay applies to them.
type Semaphore struct {
	Name  string
	Limit int
}

// Acquire acquires n permits of the semaphore (1 <= n <= sem.Limit),
// waiting in its FIFO queue until they are granted, ctx ends or the session
// ends — with every guarantee of Lock (nothing left held or queued when ctx
// ends first). The returned Lease holds the n permits (Lease.Permits) until
// Unlock; its Token is the grant's fencing token.
//
// A session may hold several grants of one semaphore (its goroutines share
// a pool), up to the limit: asking for n permits while the session holds k
// with k + n > sem.Limit returns an error wrapping ErrAlreadyHeld at once
// (they could only be granted after the session's own release). Within the
// limit a request still queues behind a larger one that arrived first: a
// goroutine must not wait for more permits while it holds some.
func (s *Session) Acquire(ctx context.Context, sem Semaphore, n int, opts ...AcquireOption) (*Lease, error) {
	return s.acquireKind(ctx, permits(sem, n, true, opts))
}

// TryAcquire acquires n permits if they are free and nobody waits ahead,
// and returns a *LockedError (wrapping ErrLocked, with the permits free)
// otherwise (ErrAlreadyHeld as Acquire); like TryLock it answers promptly
// without a quorum.
func (s *Session) TryAcquire(ctx context.Context, sem Semaphore, n int, opts ...AcquireOption) (*Lease, error) {
	return s.acquireKind(ctx, permits(sem, n, false, opts))
}

func permits(sem Semaphore, n int, wait bool, opts []AcquireOption) fsm.Acquire {
	a := acquisition(sem.Name, wait, opts)
	a.Limit, a.Permits = sem.Limit, n
	return a
}

// SemaphoreInfo describes a semaphore as the local replica has it: its
// first holders and waiters (at most 1,000 of each; HolderCount and
// WaiterCount count them all).
type SemaphoreInfo struct {
	Name        string
	Limit       int      // 0 when the semaphore is not in use
	Used        int      // permits held
	Holders     []Holder // in grant order; Permits, Token, Value of each
	HolderCount int
	Waiters     []Waiter // FIFO
	WaiterCount int
}

// DescribeSemaphore returns the semaphore as the session's replica has it
// (fast; may lag the cluster by the replication delay). A name not in use
// gives a SemaphoreInfo with Limit 0; a lock gives an error wrapping
// ErrConflict.
func (s *Session) DescribeSemaphore(name string) (SemaphoreInfo, error) {
	li, ok := s.r.Lock(name)
	if !ok {
		return SemaphoreInfo{Name: name}, nil
	}
	if li.Limit == 0 {
		return SemaphoreInfo{}, &ConflictError{Name: name, Reason: "\"" + name + "\" is a lock, not a semaphore"}
	}
	return SemaphoreInfo{Name: name, Limit: li.Limit, Used: li.Used, Holders: holdersOf(li.Shared), HolderCount: li.SharedCount,
		Waiters: waitersOf(li.Waiters), WaiterCount: li.WaiterCount}, nil
}
