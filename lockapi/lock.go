package lockapi

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/leasetrace"
	"github.com/raftlock/raftlock/internal/lockinfo"
	"github.com/raftlock/raftlock/node"
)

// pending is an acquisition between its proposal and its grant.
type pending struct {
	name    string
	owner   lockinfo.OwnerID
	granted chan grant // buffered: the event loop never blocks
	failed  chan error
	queued  bool   // guarded by the session's mu
	index   uint64 // log index of the Acquire, once queued; guarded by mu
	s       *Session

	want fsm.Acquire // the kind asked for: Shared, Limit, Permits, Value (see acquisition)
}

// grant is a grant seen by the event loop: the token and its log index.
type grant struct {
	token Token
	index uint64
}

func (p *pending) grant(t Token, index uint64) {
	select {
	case p.granted <- grant{t, index}:
	default:
	}
}

func (p *pending) fail(err error) {
	select {
	case p.failed <- err:
	default:
	}
}

func (p *pending) isQueued() bool {
	p.s.mu.Lock()
	defer p.s.mu.Unlock()
	return p.queued
}

func (p *pending) queuedAt() uint64 {
	p.s.mu.Lock()
	defer p.s.mu.Unlock()
	return p.index
}

// Lock acquires the named lock, waiting in the lock's FIFO queue until it is
// granted, ctx ends, or the session ends. Waiting costs nothing: the waiter
// is woken by its own replica when the grant is applied (no polling).
//
// If ctx ends first, Lock returns an error wrapping ctx.Err() (and
// ErrNoQuorum if the session was in jeopardy); the wait is withdrawn and, if
// the grant raced in, released — nothing is left held or queued. If the
// session is lost while waiting, Lock returns an error wrapping
// ErrSessionExpired at once. If the grant ended before Lock could return it
// (an operator revoked it while the answer was on its way), Lock returns an
// error wrapping ErrLeaseLost: a returned Lease was held when Lock returned.
//
// The returned Lease carries the fencing token; pass Lease.Context to the
// work, and Lease.Token to the protected resource.
//
// Locks are not reentrant, and a session never waits for itself: Lock of a
// name the session already holds — exclusively, or for reading (a read lock
// is not upgraded) — returns an error wrapping ErrAlreadyHeld at once,
// without asking the cluster, instead of waiting for its own grant until
// ctx ends. This holds for every goroutine of the session: goroutines that
// must exclude each other through one name take a session each (or
// serialize locally). Only grants the session holds when Lock is called
// count: two concurrent Lock calls of one session for a free name both
// queue, and the second is granted once the first's lease is released.
//
// Options (WithValue) attach a value to the grant.
func (s *Session) Lock(ctx context.Context, name string, opts ...AcquireOption) (*Lease, error) {
	return s.acquireKind(ctx, acquisition(name, true, opts))
}

// TryLock acquires the named lock if it is free and returns at once
// otherwise, with a *LockedError (wrapping ErrLocked) that names the holder
// — or, when this session holds it, an error wrapping ErrAlreadyHeld (as
// Lock).
// Without a quorum it returns an error wrapping ErrNoQuorum promptly — within
// a few election timeouts — even if ctx has no deadline.
func (s *Session) TryLock(ctx context.Context, name string, opts ...AcquireOption) (*Lease, error) {
	return s.acquireKind(ctx, acquisition(name, false, opts))
}

// TryTimeout returns how long TryLock (and every call of this package that
// must answer promptly) waits for the cluster through n before it answers
// ErrNoQuorum: a few election timeouts of n's Raft timing (a nil n: the
// default timing). Use it to bound what a prompt answer depends on, such as
// opening the session for a TryLock.
func TryTimeout(n *node.Node) time.Duration {
	t := timingOf(n)
	return tryTimeout(t.HeartbeatTimeout, t.ElectionTimeout)
}

func tryTimeout(heartbeat, election time.Duration) time.Duration {
	return 4 * (heartbeat + election)
}

func (s *Session) tryTimeout() time.Duration { return tryTimeout(s.r.Timeouts()) }

func newOwnerID() lockinfo.OwnerID {
	var o lockinfo.OwnerID
	for o.IsZero() {
		rand.Read(o[:])
	}
	return o
}

// acquireKind acquires what want asks for (its Lock, Wait and the kind of
// grant: exclusive, Shared, or Permits of a semaphore of Limit, with a
// Value); Session, Owner and the request numbers are filled in here.
func (s *Session) acquireKind(ctx context.Context, want fsm.Acquire) (*Lease, error) {
	name, wait := want.Lock, want.Wait
	if err := s.checkCall(ctx); err != nil {
		return nil, err
	}
	if err := validateAcquisition(want); err != nil {
		return nil, err
	}
	s.checkDeadline()
	p := &pending{name: name, owner: newOwnerID(), want: want, granted: make(chan grant, 1), failed: make(chan error, 1), s: s}
	s.mu.Lock()
	if s.err != nil {
		err := s.err
		s.mu.Unlock()
		return nil, fmt.Errorf("lockapi: lock %q: %w", name, err)
	}
	if err := s.ownConflictLocked(want); err != nil {
		s.mu.Unlock()
		return nil, err
	}
	s.pending[p.owner] = p // before proposing: the grant may be applied before Apply returns
	s.mu.Unlock()

	start := time.Now()
	pctx, cancel := s.bind(ctx) // the call ends with its session
	defer cancel()
	var try context.Context
	if !wait {
		var cancelTry context.CancelFunc
		try, cancelTry = context.WithTimeout(pctx, s.tryTimeout())
		defer cancelTry()
		pctx = try
	}
	// Propose, not Apply: the result is all Lock needs; waiting until this
	// replica has applied it too would cost a round of replication.
	want.Session, want.Owner = s.id, p.owner
	r, index, err := s.propose(pctx, want)
	if err != nil {
		if errors.Is(err, node.ErrNotProposed) {
			s.forget(p) // it never left this node: it can never commit
		} else {
			s.abandon(p) // the outcome is unknown: release it if it lands
		}
		return nil, fmt.Errorf("lockapi: lock %q: %w", name, s.explain(ctx, try, err, start))
	}
	switch r.Status {
	case fsmwire.StatusGranted:
		return s.newLease(p, r.Token, index, start)
	case fsmwire.StatusLocked:
		s.forget(p)
		return nil, &LockedError{Lock: name, Holder: holderOf(r.Holder), DelayUntil: r.DelayUntil, Free: r.Count}
	case fsmwire.StatusConflict:
		s.forget(p)
		return nil, &ConflictError{Name: name, Limit: r.Count, Reason: r.Reason}
	case fsmwire.StatusNoSession:
		s.forget(p)
		err := fmt.Errorf("%w: the cluster no longer knows the session", ErrSessionExpired)
		s.lose(leasetrace.LostEnded, err)
		return nil, fmt.Errorf("lockapi: lock %q: %w", name, err)
	case fsmwire.StatusQueued:
	default:
		s.forget(p)
		return nil, fmt.Errorf("lockapi: lock %q: %w", name, r.Err())
	}

	s.mu.Lock()
	p.queued, p.index = true, index
	s.mu.Unlock()
	s.metrics.waiting(1)
	defer s.metrics.waiting(-1)
	select {
	case g := <-p.granted:
		return s.newLease(p, g.token, g.index, start)
	case err := <-p.failed:
		s.forget(p)
		return nil, fmt.Errorf("lockapi: lock %q: %w", name, err)
	case <-ctx.Done():
		s.metrics.acquireTimedOut()
		s.withdraw(p)
		err := ctx.Err()
		if s.State() == StateJeopardy {
			err = fmt.Errorf("%w: %w", ErrNoQuorum, err)
		}
		return nil, fmt.Errorf("lockapi: lock %q: %w", name, err)
	}
}

// newLease turns a granted acquisition into a Lease, unless the session's
// lease has meanwhile run out (then the grant is released), or the grant has
// already ended: the local replica may apply the grant and its end (a
// revocation) before the leader's reply to the Acquire arrives, or a resync
// may have read a state past the grant before the lease existed. Either way
// no later event would end such a lease.
func (s *Session) newLease(p *pending, tok Token, index uint64, start time.Time) (*Lease, error) {
	s.mu.Lock()
	if s.err != nil || !time.Now().Before(s.validUntil) {
		err := s.err
		s.mu.Unlock()
		if err == nil {
			err = fmt.Errorf("%w: the lease deadline passed", ErrSessionExpired)
		}
		s.abandon(p)
		return nil, fmt.Errorf("lockapi: lock %q: %w", p.name, err)
	}
	var ended error
	select {
	case ended = <-p.failed: // its release or dequeue was applied here first
	default:
		if index <= s.syncedAt {
			if st := s.r.Owner(p.name, p.owner); !st.Held || st.Token != tok {
				ended = errors.New("no longer held when the session resynchronized")
			}
		}
	}
	if ended != nil {
		delete(s.pending, p.owner)
		s.mu.Unlock()
		return nil, fmt.Errorf("lockapi: lock %q: %w: the grant ended before Lock could return it: %w", p.name, ErrLeaseLost, ended)
	}
	l := newLease(s, p.name, p.owner, tok, index)
	l.shared, l.permits, l.value = p.want.Shared, p.want.Permits, p.want.Value
	s.addLeaseLocked(l)
	delete(s.pending, p.owner)
	s.mu.Unlock()
	s.metrics.acquired(time.Since(start))
	return l, nil
}

// forget drops a pending acquisition that did not take effect.
func (s *Session) forget(p *pending) {
	s.mu.Lock()
	delete(s.pending, p.owner)
	s.mu.Unlock()
}

// abandon forgets an acquisition whose outcome nobody will wait for (its
// proposal did not answer in time, or its grant came too late). If the local
// replica shows it held or queued, it is released now; if it lands later,
// the session's watch meets a grant or queue entry of an owner it does not
// know and releases it then (releaseUnknown). Either way the session keeps
// nothing about it: an acquisition that was never proposed, or that never
// commits, costs nothing.
func (s *Session) abandon(p *pending) {
	s.forget(p)
	s.releaseUnknown(p.name, p.owner)
}

// withdraw gives up a queued acquisition: one Release dequeues it, or
// releases it if the grant raced in. It runs in the background so that Lock
// returns as soon as its context ends.
func (s *Session) withdraw(p *pending) {
	s.mu.Lock()
	delete(s.pending, p.owner)
	r := s.addReleaseLocked(p.name, p.owner) // nil if the session is gone, and its waits with it
	s.mu.Unlock()
	if r != nil {
		s.retryRelease(r)
	}
}
