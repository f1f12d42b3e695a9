package lockapi

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// bind returns a context that ends when ctx ends or when the session ends
// (lost or closed), whichever comes first: every blocking call of a session
// runs under it, so that no call outlives its session. Call the returned
// function when done.
func (s *Session) bind(ctx context.Context) (context.Context, context.CancelFunc) {
	bctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(s.ctx, func() { cancel(context.Cause(s.ctx)) })
	return bctx, func() {
		stop()
		cancel(nil)
	}
}

// explain turns the error of a session command that did not commit into
// what the caller should see (see explainFailure); try is the call's own
// deadline context, if it set one on top of ctx (TryLock), else nil.
func (s *Session) explain(ctx, try context.Context, err error, start time.Time) error {
	var sessErr error
	if s.ctx.Err() != nil {
		sessErr = s.Err()
	}
	ownDeadline := try != nil && try.Err() != nil && ctx.Err() == nil
	return explainFailure(err, sessErr, ctx.Err() != nil, ownDeadline, time.Since(start), s.electionTimeout())
}

// explainFailure decides what a caller sees when its command did not
// commit. In order:
//   - the caller's context is still alive but the session ended: the
//     session's error (ErrSessionExpired, ErrSessionClosed) — the call was
//     cut short because its session ended;
//   - the error already says ErrNoQuorum: it stays;
//   - a context error after the call's own deadline passed (TryLock's try
//     timeout), or after the call waited at least an election timeout: the
//     cluster could not commit in the time it had, so the error wraps
//     ErrNoQuorum as well as the context error;
//   - anything else as it is.
func explainFailure(err, sessErr error, callerDone, ownDeadline bool, waited, electionTimeout time.Duration) error {
	ctxErr := errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
	switch {
	case sessErr != nil && !callerDone:
		return sessErr
	case errors.Is(err, ErrNoQuorum):
		return err
	case ctxErr && (ownDeadline || waited >= electionTimeout):
		return fmt.Errorf("%w: not committed within %v: %w", ErrNoQuorum, waited.Round(time.Millisecond), err)
	}
	return err
}

// checkCall validates what every session call needs: a session and a
// context.
func (s *Session) checkCall(ctx context.Context) error {
	switch {
	case s == nil:
		return invalid("nil session")
	case ctx == nil:
		return invalid("nil context")
	}
	return nil
}
