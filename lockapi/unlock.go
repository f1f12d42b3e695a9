package lockapi

import (
	"context"
	"fmt"
	"time"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/leasetrace"
)

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
// ErrNotHolder means the cluster answered: the lease had been lost before
// Unlock (the error also wraps the cause of the loss) and the grant is no
// longer held — released by this call, or already ended by the cluster (the
// lock may meanwhile belong to someone else). If the session ends while the
// release is on its way, Unlock returns at once with an error wrapping the
// session's error (ErrSessionExpired, ErrSessionClosed) and not
// ErrNotHolder: the release is moot, the session's end releases the lock,
// but when is not known. Unlock of a lease whose session had already ended
// makes one attempt, bounded by ctx and TryTimeout, to release the grant in
// case the cluster still has it — for a lost session (its lease lapsed,
// also when Unlock is the first to notice) with expiry semantics: the lock
// stays ungranted for the session's lock-delay.
//
// Once Unlock has returned a result other than a failure to commit, further
// calls return the same result. A nil ctx (or lease) is refused with
// ErrInvalidArgument.
func (l *Lease) Unlock(ctx context.Context) error {
	switch {
	case l == nil:
		return invalid("nil lease")
	case ctx == nil:
		return invalid("nil context")
	}
	// A lease whose session lapsed is lost before anything is sent: its
	// release then has expiry semantics (releaseAfterEnd).
	l.s.checkDeadline()
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
	s.dropLeaseLocked(l.owner)
	r := s.addReleaseLocked(l.name, l.owner) // nil once the session has ended
	background := r != nil && r.background
	s.mu.Unlock()
	if r == nil {
		return l.finishUnlock(l.releaseAfterEnd(ctx, lost))
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
		if s.ctx.Err() != nil && ctx.Err() == nil { // err is the session's error
			return l.finishUnlock(fmt.Errorf("lockapi: unlock %q: the session ended before the release committed: %w", l.name, err))
		}
		s.retryRelease(r)
		return fmt.Errorf("lockapi: unlock %q: %w (the release is retried in the background until it commits or the session ends)", l.name, err)
	}
	status, failed := s.result(r)
	if failed != nil { // the session ended, or the node closed, before it committed
		return l.finishUnlock(fmt.Errorf("lockapi: unlock %q: the release did not commit: %w", l.name, failed))
	}
	return l.finishUnlock(l.unlockResult(status, lost))
}

// unlockResult is Unlock's result once its Release committed with status;
// lost is why the lease had ended before Unlock, if it had.
func (l *Lease) unlockResult(status fsmwire.Status, lost error) error {
	switch status {
	case fsmwire.StatusNoSession: // the cluster closed or expired the session: that released it
		err := fmt.Errorf("%w: the cluster no longer knows the session", ErrSessionExpired)
		l.s.lose(leasetrace.LostEnded, err)
		if lost == nil {
			lost = err
		}
	case fsmwire.StatusNotHolder:
		if lost == nil {
			// The session may have ended during the call (its deadline
			// passed while the release was on its way). If not, an earlier
			// ambiguous attempt of this very release committed: while the
			// session is valid nobody else can release its lock.
			lost = l.s.Err()
		}
	case fsmwire.StatusOK:
	default:
		return fmt.Errorf("lockapi: unlock %q: release: %v", l.name, status)
	}
	if lost != nil {
		return fmt.Errorf("lockapi: unlock %q: %w: %w", l.name, ErrNotHolder, lost)
	}
	return nil
}

// releaseAfterEnd is Unlock of a lease whose session has ended on the
// client: one attempt, bounded by ctx and the try timeout, to release the
// grant in case the cluster still has it (the session's close or expiry
// releases it otherwise). The release of a lost session's lease is the
// lapsed form (fsm.Release with Lapsed): the lease lapsed before this Unlock, so the
// lock enters the session's lock-delay as on the session's expiry, whether
// this release or the lost session's close commits first.
func (l *Lease) releaseAfterEnd(ctx context.Context, lost error) error {
	s := l.s
	if lost == nil {
		lost = s.Err()
	}
	tctx, cancel := context.WithTimeout(ctx, s.tryTimeout())
	defer cancel()
	rel := fsm.Release{Lock: l.name, Owner: l.owner, Lapsed: s.State() == StateLost}
	r, _, err := s.propose(tctx, rel)
	switch {
	case err != nil:
		return fmt.Errorf("lockapi: unlock %q: %w (the release did not commit: %v; the session's end releases the lock)", l.name, lost, err)
	case r.Status == fsmwire.StatusQuota:
		return fmt.Errorf("lockapi: unlock %q: %w (the release was refused: %v; the session's end releases the lock)", l.name, lost, r.Err())
	}
	return fmt.Errorf("lockapi: unlock %q: %w: %w", l.name, ErrNotHolder, lost)
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
