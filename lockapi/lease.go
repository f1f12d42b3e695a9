package lockapi

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/raftlock/raftlock/fsm"
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
	owner    fsm.OwnerID
	token    fsm.Token
	index    uint64 // log index of the grant
	acquired time.Time
	ctx      context.Context
	cancel   context.CancelCauseFunc

	mu        sync.Mutex
	err       error // why the lease ended; nil while held
	unlocking bool
	unlocked  bool
	unlockErr error
}

func newLease(s *Session, name string, owner fsm.OwnerID, tok fsm.Token, index uint64) *Lease {
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
func (l *Lease) Token() fsm.Token { return l.token }

// Owner returns the acquisition's owner id.
func (l *Lease) Owner() fsm.OwnerID { return l.owner }

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

// Unlock releases the lock — a compare-and-delete by the acquisition's owner
// id, so it can never release someone else's grant — and ends the lease at
// once (Done is closed before Unlock returns, whatever the outcome).
//
// If the release cannot commit before ctx ends, Unlock returns an error
// wrapping ctx's error — and ErrNoQuorum when the cluster could not commit
// in the time it had (an election timeout or more) — and the session keeps
// retrying the release in the background until it commits or the session
// ends (whose end releases everything the session holds): a failed Unlock
// never leaves the lock held for the life of the session. Calling Unlock
// again waits for that release.
//
// If the lease had already been lost, Unlock returns an error wrapping
// ErrNotHolder and the cause of the loss (and still asks the cluster to
// release the lock while the session lives). If the session ends while the
// release is on its way, Unlock returns at once with the session's error
// (ErrSessionExpired, ErrSessionClosed): the session's end releases the lock.
// Once Unlock has returned a result other than ErrNoQuorum, further calls
// return the same result. A nil ctx is refused with ErrInvalidArgument.
func (l *Lease) Unlock(ctx context.Context) error {
	if ctx == nil {
		return invalid("nil context")
	}
	l.mu.Lock()
	if l.unlocked {
		err := l.unlockErr
		l.mu.Unlock()
		return err
	}
	lost := l.err
	if lost == ErrUnlocked {
		lost = nil // an earlier Unlock that failed to commit
	}
	l.unlocking = true
	l.mu.Unlock()
	l.end(ErrUnlocked)

	s := l.s
	s.mu.Lock()
	delete(s.leases, l.owner)
	r := s.addReleaseLocked(l.name, l.owner)
	sessErr := s.err
	background := r != nil && r.background
	s.mu.Unlock()
	// ended is the result when the release is moot because the session
	// ended (its end releases everything the session held).
	ended := func(cause error) error {
		if lost != nil {
			return l.finishUnlock(fmt.Errorf("lockapi: unlock %q: %w: %w", l.name, ErrNotHolder, lost))
		}
		return l.finishUnlock(fmt.Errorf("lockapi: unlock %q: %w", l.name, cause))
	}
	if r == nil {
		return ended(sessErr)
	}

	start := time.Now()
	var err error
	if background {
		// An earlier Unlock failed; its release is being retried.
		if err = s.waitRelease(ctx, r); err != nil {
			err = s.explain(ctx, nil, err, start)
		}
	} else {
		err = s.tryRelease(ctx, r)
	}
	if err != nil {
		if s.ctx.Err() != nil && ctx.Err() == nil {
			return ended(err) // err is the session's error
		}
		s.retryRelease(r)
		return fmt.Errorf("lockapi: unlock %q: %w (the release is retried in the background until it commits or the session ends)", l.name, err)
	}
	status, failed := s.result(r)
	if failed != nil { // the session ended, or the node closed, before it committed
		return ended(failed)
	}
	if status == fsm.StatusNoSession { // the cluster closed or expired the session: that released it
		err := fmt.Errorf("%w: the cluster no longer knows the session", ErrSessionExpired)
		s.lose(err)
		return ended(err)
	}
	if lost == nil && status == fsm.StatusNotHolder {
		// The session may have ended during the call (its deadline passed
		// while the release was on its way).
		lost = s.Err()
	}
	var result error
	switch {
	case lost != nil:
		result = fmt.Errorf("lockapi: unlock %q: %w: %w", l.name, ErrNotHolder, lost)
	case status == fsm.StatusOK, status == fsm.StatusNotHolder:
		// NotHolder while the session is still valid means an earlier,
		// ambiguous attempt of this very release committed: while the
		// session is valid nobody else can release its lock.
	default:
		result = fmt.Errorf("lockapi: unlock %q: release: %v", l.name, status)
	}
	return l.finishUnlock(result)
}

// finishUnlock records Unlock's final result and returns it.
func (l *Lease) finishUnlock(result error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.unlocked {
		l.unlocked, l.unlockErr = true, result
	}
	return l.unlockErr
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
