package lockapi

import (
	"fmt"
	"time"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/leasetrace"
)

// watch enforces the client-side lease deadline and follows the events the
// local replica applies for this session: grants to waiting acquisitions,
// releases and dequeues, and the session's own end.
func (s *Session) watch() {
	defer s.wg.Done()
	timer := time.NewTimer(time.Until(s.ValidUntil()))
	defer timer.Stop()
	for {
		select {
		case <-s.stop:
			return
		case e := <-s.sub.C:
			s.handle(e)
		case <-s.sub.Resync:
			s.resync()
		case <-timer.C:
			if d := time.Until(s.ValidUntil()); d > 0 {
				timer.Reset(d)
				continue
			}
			s.lose(leasetrace.LostDeadline, s.deadlineCause())
			return
		}
	}
}

func reasonErr(r fsmwire.Reason) error {
	switch r {
	case fsmwire.ReasonSessionExpired:
		return fmt.Errorf("%w: expired by the leader", ErrSessionExpired)
	case fsmwire.ReasonSessionClosed:
		return ErrSessionClosed
	case fsmwire.ReasonRevoked:
		return fmt.Errorf("%w: revoked by an operator", ErrNotHolder)
	}
	return fmt.Errorf("%w: released with its owner id", ErrNotHolder)
}

func (s *Session) handle(e fsm.Event) {
	s.mu.Lock()
	s.pruneSettledLocked()
	stale := e.Index <= s.syncedAt
	s.mu.Unlock()
	if stale {
		return // applied before the state resync read: judged there
	}
	switch e.Kind {
	case fsmwire.EventGranted, fsmwire.EventQueued:
		s.mu.Lock()
		p := s.pending[e.Owner]
		known := p != nil || s.leases[e.Owner] != nil || s.releases[e.Owner] != nil
		s.mu.Unlock()
		switch {
		case p != nil:
			if e.Kind == fsmwire.EventGranted {
				p.grant(e.Token, e.Index)
			}
		case !known:
			s.releaseUnknown(e.Lock, e.Owner)
		}
	case fsmwire.EventReleased, fsmwire.EventDequeued:
		s.mu.Lock()
		if r := s.releases[e.Owner]; r != nil && r.finished && r.index <= e.Index {
			s.forgetReleaseLocked(r) // its own event: every earlier one was handled
		}
		l := s.leases[e.Owner]
		p := s.pending[e.Owner]
		if l != nil && !l.isUnlocking() {
			s.dropLeaseLocked(e.Owner)
		} else {
			l = nil
		}
		s.mu.Unlock()
		if l != nil {
			l.end(fmt.Errorf("%w: %w", ErrLeaseLost, reasonErr(e.Reason)))
			s.metrics.leasesLost(1)
		}
		if p != nil {
			p.fail(reasonErr(e.Reason))
		}
	case fsmwire.EventSessionExpired:
		s.lose(leasetrace.LostEnded, fmt.Errorf("%w: expired by the leader", ErrSessionExpired))
	case fsmwire.EventSessionClosed:
		s.lose(leasetrace.LostEnded, fmt.Errorf("%w: closed in the cluster", ErrSessionExpired))
	}
}

// earlyGrant hands a grant the leader announced (before this replica
// applied it) straight to the Lock call waiting for it, on the goroutine
// that received the announcement: the watch would only do the same, a
// goroutine hand-off later. An announced grant is committed; one for an
// owner with no pending call is left to the applied event, which the watch
// judges in order (handle); so is one the session has already judged by a
// resync. Never blocks.
func (s *Session) earlyGrant(e fsm.Event) {
	if e.Kind != fsmwire.EventGranted {
		return
	}
	s.mu.Lock()
	p := s.pending[e.Owner]
	stale := e.Index <= s.syncedAt
	s.mu.Unlock()
	if p != nil && !stale {
		p.grant(e.Token, e.Index)
	}
}

// resync re-reads what the session cares about after events were missed or
// the replica restored a snapshot.
func (s *Session) resync() {
	// The applied index first: every state read below reflects at least
	// it, so the events up to it, which may still be queued behind the
	// Resync, are skipped by handle.
	applied := s.r.AppliedIndex()
	s.mu.Lock()
	s.syncedAt = max(s.syncedAt, applied)
	s.mu.Unlock()
	if _, ok := s.r.Session(s.id); !ok {
		s.lose(leasetrace.LostEnded, fmt.Errorf("%w: the session no longer exists", ErrSessionExpired))
		return
	}
	s.mu.Lock()
	var pend []*pending
	for _, p := range s.pending {
		pend = append(pend, p)
	}
	var leases []*Lease
	for _, l := range s.leases {
		leases = append(leases, l)
	}
	s.mu.Unlock()
	// The local replica may not have applied an acquisition yet (Propose
	// does not wait for it): judge only those it has.
	for _, p := range pend {
		st := s.r.Owner(p.name, p.owner)
		switch {
		case st.Held:
			p.grant(st.Token, applied)
		case st.Position == 0 && p.isQueued() && applied >= p.queuedAt():
			p.fail(fmt.Errorf("%w: the wait was dropped", ErrLeaseLost))
		}
	}
	for _, l := range leases {
		if applied < l.index {
			continue
		}
		if st := s.r.Owner(l.name, l.owner); (!st.Held || st.Token != l.token) && !l.isUnlocking() {
			s.mu.Lock()
			s.dropLeaseLocked(l.owner)
			s.mu.Unlock()
			l.end(fmt.Errorf("%w: no longer the holder", ErrLeaseLost))
		}
	}
	s.releaseUnknownLocks()
}
