package lockapi

import (
	"context"
	"errors"
	"fmt"
)

// ErrNotLeader: Proclaim or Resign on an Election whose Campaign has not
// won, or whose leadership has ended (resigned, or its lease lost).
var ErrNotLeader = errors.New("lockapi: not the leader")

// Campaign makes s a candidate of the election with value, and returns
// once it leads (its Lease: the election lock's exclusive grant, carrying
// value), ctx ends or the session ends — with the guarantees of Lock:
// candidates are served in FIFO order and, when ctx ends first, nothing is
// left held or queued. Observers on every replica see the new leader with
// its token and value. One Election holds one candidacy at a time: a
// second Campaign while leading fails with ErrInvalidArgument (use another
// Election value for another candidate).
func (e *Election) Campaign(ctx context.Context, s *Session, value string) (*Lease, error) {
	if s == nil {
		return nil, invalid("nil session")
	}
	e.mu.Lock()
	if e.lease != nil && e.lease.Err() == nil {
		e.mu.Unlock()
		return nil, invalid("election %q: already leading (token %d)", e.name, e.lease.Token())
	}
	e.mu.Unlock()
	l, err := s.Lock(ctx, e.name, WithValue(value))
	if err != nil {
		return nil, fmt.Errorf("lockapi: campaign in election %q: %w", e.name, err)
	}
	e.mu.Lock()
	e.lease = l
	e.mu.Unlock()
	return l, nil
}

// Proclaim replaces the leader's value without giving up leadership (see
// Lease.SetValue); ErrNotLeader if this Election does not lead.
func (e *Election) Proclaim(ctx context.Context, value string) error {
	l, err := e.leading()
	if err != nil {
		return err
	}
	if err := l.SetValue(ctx, value); err != nil {
		return fmt.Errorf("lockapi: proclaim in election %q: %w", e.name, err)
	}
	return nil
}

// Resign gives up leadership at once — the next candidate is granted in
// the same log entry — instead of waiting for the session to expire.
// ErrNotLeader if this Election does not lead; errors of Lease.Unlock
// otherwise (ErrNoQuorum: the leadership has ended locally, and calling
// Resign again retries the release).
func (e *Election) Resign(ctx context.Context) error {
	e.mu.Lock()
	l := e.lease
	e.mu.Unlock()
	if l == nil {
		return fmt.Errorf("lockapi: resign from election %q: %w", e.name, ErrNotLeader)
	}
	if err := l.Unlock(ctx); err != nil {
		return fmt.Errorf("lockapi: resign from election %q: %w", e.name, err)
	}
	e.mu.Lock()
	if e.lease == l {
		e.lease = nil
	}
	e.mu.Unlock()
	return nil
}

// leading returns this Election's lease while it leads.
func (e *Election) leading() (*Lease, error) {
	e.mu.Lock()
	l := e.lease
	e.mu.Unlock()
	if l == nil || l.Err() != nil {
		return nil, fmt.Errorf("lockapi: election %q: %w", e.name, ErrNotLeader)
	}
	return l, nil
}
