package lockapi

import (
	"context"
	"sync"
	"time"

	"github.com/raftlock/raftlock/internal/lockinfo"
)

// Lease is one granted acquisition of a lock. It is valid until Unlock is
// called or the lease is lost; Done is closed and Context cancelled at that
// moment, before the cluster can grant the lock to anyone else. A Lease is
// safe for concurrent use.
//
// What loss means: the holder's session was not renewed in time (the process
// paused, the network or the cluster failed), so the client counts the lease
// as over and the cluster will soon grant the lock to the next waiter. The
// holder must stop its work — and since stopping is not instantaneous, the
// protected resource must check Token (see package fence).
type Lease struct {
	s        *Session
	name     string
	owner    lockinfo.OwnerID
	token    Token
	index    uint64 // log index of the grant
	acquired time.Time
	ctx      context.Context
	cancel   context.CancelCauseFunc
	shared   bool // a read grant (RLock)
	permits  int  // a semaphore's permits (Acquire)

	mu        sync.Mutex
	err       error // why the lease ended; nil while held
	unlocking bool
	unlocked  bool
	unlockErr error

	value string // the grant's value (WithValue, SetValue); guarded by mu
}

func newLease(s *Session, name string, owner lockinfo.OwnerID, tok Token, index uint64) *Lease {
	l := &Lease{s: s, name: name, owner: owner, token: tok, index: index, acquired: time.Now()}
	// Not derived from the session's context: the session ends every lease
	// itself (Session.end), so that the lease's cause is ErrLeaseLost.
	l.ctx, l.cancel = context.WithCancelCause(context.Background())
	return l
}

// Name returns the lock's name.
func (l *Lease) Name() string { return l.name }

// Token returns the fencing token of this grant: strictly greater than the
// token of every earlier grant of the same lock.
func (l *Lease) Token() Token { return l.token }

// Owner returns the acquisition's owner id.
func (l *Lease) Owner() OwnerID { return OwnerID(l.owner) }

// Session returns the session the lease belongs to.
func (l *Lease) Session() *Session { return l.s }

// Acquired returns when the lock was granted (local clock).
func (l *Lease) Acquired() time.Time { return l.acquired }

// Done returns a channel closed when the lease ends (lost or unlocked).
func (l *Lease) Done() <-chan struct{} { return l.ctx.Done() }

// Context returns a context cancelled when the lease ends; pass it to the
// work the lock protects. context.Cause(ctx) is the same as Err.
func (l *Lease) Context() context.Context { return l.ctx }

// Err returns nil while the lease is held, then ErrUnlocked after Unlock, or
// an error wrapping ErrLeaseLost and its cause. It checks the session's
// deadline itself, so it never reports a lease as held past that deadline,
// even if the session's goroutine has not run yet (a process that just
// resumed from a pause) — but a process can pause right after Err returns
// nil: fence your writes.
func (l *Lease) Err() error {
	l.s.checkDeadline()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

func (l *Lease) end(err error) {
	l.mu.Lock()
	if l.err == nil {
		l.err = err
	}
	l.mu.Unlock()
	l.cancel(err)
}

func (l *Lease) isUnlocking() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.unlocking
}

// waitReleased waits until the lease's lock is no longer held by it: its
// release committed, or the session ended (which releases everything), or
// there is nothing to release (the lease was not unlocked through a release
// still in progress). It returns ctx's error if ctx ends first.
func (l *Lease) waitReleased(ctx context.Context) error {
	if r := l.s.pendingRelease(l.owner); r != nil {
		return l.s.waitRelease(ctx, r)
	}
	return nil
}
