package lockapi

import (
	"context"

	"github.com/raftlock/raftlock/fsm"
)

// Read-write locks. A lock name is also a read-write lock: Lock takes it
// exclusively (the writer), RLock shared (a reader). Many readers hold it
// at once, or one writer; never both. The queue is one FIFO for both: a
// reader that comes while a writer waits waits behind it, so writers are
// not starved, and when a writer is done the readers at the head of the
// queue are granted together, up to the next writer.
//
// Tokens. Every grant — read or write — takes the next token, so tokens
// strictly increase over all grants of the name. A writer's token exceeds
// every token granted before it, so a write fence (package fence) rejects
// any writer older than the newest as usual. A reader's token lies between
// the tokens of the writers granted before and after it: a resource can
// validate a read with it — the newest write it accepted has a token below
// the reader's, so no later writer has written yet — but must not record a
// reader's token as a write (concurrent readers would refuse each other).
//
// A reader's lease ends like any lease (Unlock, session loss). The expiry
// of a reader's session never starts a lock-delay (only a writer's does);
// fence what readers read if a paused reader matters.

// RLock acquires a read (shared) grant of the named lock, waiting in its
// FIFO queue until granted, ctx ends or the session ends — with every
// guarantee of Lock (nothing left held or queued when ctx ends first). The
// Lease's Shared reports true.
//
// RLock of a name the session holds exclusively returns an error wrapping
// ErrAlreadyHeld at once (it would wait for its own writer), and so does
// Lock of a name the session reads (no upgrades). A session may hold
// several read grants of a name — its goroutines read together — but, as
// with sync.RWMutex, a second RLock queues behind a writer that waits for
// the first: a goroutine must not wait for a second read grant while it
// holds one.
func (s *Session) RLock(ctx context.Context, name string, opts ...AcquireOption) (*Lease, error) {
	return s.acquireKind(ctx, shared(name, true, opts))
}

// TryRLock acquires a read grant if it can be granted now — no writer holds
// or waits for the lock — and returns a *LockedError (wrapping ErrLocked)
// otherwise (ErrAlreadyHeld as RLock); like TryLock it answers promptly
// without a quorum.
func (s *Session) TryRLock(ctx context.Context, name string, opts ...AcquireOption) (*Lease, error) {
	return s.acquireKind(ctx, shared(name, false, opts))
}

func shared(name string, wait bool, opts []AcquireOption) fsm.Acquire {
	a := acquisition(name, wait, opts)
	a.Shared = true
	return a
}
