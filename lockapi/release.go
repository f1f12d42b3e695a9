package lockapi

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/lockinfo"
	"github.com/raftlock/raftlock/node"
)

// release is a Release that must commit: the Unlock of a lease, the
// withdrawal of a wait whose caller gave up, or the release of an
// acquisition the session does not know (an abandoned outcome that landed, a
// delayed duplicate). It is tried until it commits or the session ends —
// the session's end (close, or expiry by the leader) releases everything the
// session holds, so nothing is left held either way.
//
// A release is registered in Session.releases while it is being tried, and
// after it committed until the local replica has applied it (settling): the
// session's watch then knows the owner and does not take the grant events of
// the local replica, which may lag the leader by a round, for a grant nobody
// knows (on a follower, a fast Lock+Unlock would otherwise cost a second
// Release about one time in five).
type release struct {
	name  string
	owner lockinfo.OwnerID
	done  chan struct{} // closed once the Release committed or the session ended

	// Guarded by the session's mu; final once done is closed.
	status     fsmwire.Status // the committed Release's status
	index      uint64         // its log index
	err        error          // why it never committed (the session ended, the node closed)
	background bool           // a background loop is trying it
	finished   bool
	attempts   int
}

// addReleaseLocked registers a release of (name, owner) — or returns the one
// already registered — unless the session has ended (nil: its end releases
// everything). The caller holds s.mu.
func (s *Session) addReleaseLocked(name string, owner lockinfo.OwnerID) *release {
	if s.err != nil {
		return nil
	}
	if r := s.releases[owner]; r != nil {
		return r
	}
	r := &release{name: name, owner: owner, done: make(chan struct{})}
	s.releases[owner] = r
	return r
}

// finishReleaseLocked ends a release with the status it committed with at
// index, or with err if it never committed. A committed release stays known
// until the local replica has applied it. The caller holds s.mu.
func (s *Session) finishReleaseLocked(r *release, status fsmwire.Status, index uint64, err error) {
	if r.finished {
		return
	}
	r.finished, r.status, r.index, r.err = true, status, index, err
	close(r.done)
	if err == nil && s.err == nil {
		s.settling = append(s.settling, r)
	} else {
		s.forgetReleaseLocked(r)
	}
	s.pruneSettledLocked()
}

func (s *Session) finishRelease(r *release, status fsmwire.Status, index uint64, err error) {
	s.mu.Lock()
	s.finishReleaseLocked(r, status, index, err)
	s.mu.Unlock()
}

func (s *Session) forgetReleaseLocked(r *release) {
	if s.releases[r.owner] == r {
		delete(s.releases, r.owner)
	}
}

// pruneSettledLocked forgets committed releases that the local replica has
// applied (in commit order, roughly: one applied out of order waits for those
// before it). The caller holds s.mu.
func (s *Session) pruneSettledLocked() {
	applied := s.r.AppliedIndex()
	for len(s.settling) > 0 && s.settling[0].index <= applied {
		s.forgetReleaseLocked(s.settling[0])
		s.settling[0] = nil
		s.settling = s.settling[1:]
	}
	if len(s.settling) == 0 {
		s.settling = nil
	}
}

// result returns the release's final status and error (once done).
func (s *Session) result(r *release) (fsmwire.Status, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return r.status, r.err
}

// tryRelease proposes r's Release once, bounded by ctx and by the session;
// it returns nil once the Release committed (r is then finished).
func (s *Session) tryRelease(ctx context.Context, r *release) error {
	s.mu.Lock()
	r.attempts++
	retry := r.attempts > 1
	s.mu.Unlock()
	if retry {
		s.metrics.releaseRetried()
	}
	bctx, cancel := s.bind(ctx)
	defer cancel()
	start := time.Now()
	res, index, err := s.propose(bctx, fsm.Release{Lock: r.name, Owner: r.owner})
	if err != nil {
		return s.explain(ctx, nil, err, start)
	}
	if res.Status == fsmwire.StatusQuota { // refused (the session's request window is full): nothing changed
		return fmt.Errorf("lockapi: release %q: %w", r.name, res.Err())
	}
	s.finishRelease(r, res.Status, index, nil)
	if retry {
		s.log.Info("release committed after retrying", "lock", r.name, "owner", r.owner)
	}
	return nil
}

// releaseInBackground registers a release of (name, owner) and tries it in
// the background until it commits or the session ends.
func (s *Session) releaseInBackground(name string, owner lockinfo.OwnerID) {
	s.mu.Lock()
	r := s.addReleaseLocked(name, owner)
	s.mu.Unlock()
	if r != nil {
		s.retryRelease(r)
	}
}

// retryRelease starts r's background loop, unless one runs already, r is
// finished or the session has ended.
func (s *Session) retryRelease(r *release) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil || r.background || r.finished {
		return
	}
	r.background = true
	s.wg.Add(1) // under mu with s.err nil: before Close's Wait (see end)
	go s.retryLoop(r)
}

// retryLoop tries r until it commits, the session ends or the node closes.
// Each attempt is bounded by the try timeout; between attempts it pauses for
// about an election timeout.
func (s *Session) retryLoop(r *release) {
	defer s.wg.Done()
	s.metrics.releasePending(1)
	defer s.metrics.releasePending(-1)
	for attempt := 0; ; attempt++ {
		ctx, cancel := context.WithTimeout(s.ctx, s.tryTimeout())
		err := s.tryRelease(ctx, r)
		cancel()
		switch {
		case err == nil:
			return
		case s.ctx.Err() != nil:
			return // Session.end finished it
		case errors.Is(err, node.ErrClosed), errors.Is(err, node.ErrHalted), errors.Is(err, node.ErrInvalidArgument):
			s.log.Warn("release failed for good", "lock", r.name, "owner", r.owner, "err", err)
			s.finishRelease(r, 0, 0, fmt.Errorf("lockapi: release %q: %w", r.name, err))
			return
		}
		if attempt == 0 {
			s.log.Warn("release did not commit; retrying until it does or the session ends", "lock", r.name, "owner", r.owner, "err", err)
		}
		t := time.NewTimer(jitter(s.electionTimeout()))
		select {
		case <-t.C:
		case <-s.stop:
			t.Stop()
			return
		}
	}
}

// waitRelease waits until r is finished or ctx ends.
func (s *Session) waitRelease(ctx context.Context, r *release) error {
	select {
	case <-r.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// pendingRelease returns the release of owner in progress (or settling), or
// nil.
func (s *Session) pendingRelease(owner lockinfo.OwnerID) *release {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.releases[owner]
}

// knows reports whether the owner is one of the session's acquisitions:
// waiting for its grant, held as a lease, or being released (or released,
// until the local replica has applied it).
func (s *Session) knows(owner lockinfo.OwnerID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pending[owner] != nil || s.leases[owner] != nil || s.releases[owner] != nil
}

// releaseUnknown releases an acquisition of this session that the session
// does not know, if the local replica shows it held or queued: an outcome
// that was abandoned (its proposal did not answer in time) and landed after
// all, or a delayed duplicate of an Acquire. Nobody would ever release it
// otherwise, and the session would hold the lock (or wait for it) until it
// ends.
func (s *Session) releaseUnknown(name string, owner lockinfo.OwnerID) {
	if st := s.r.Owner(name, owner); !st.Held && st.Position == 0 {
		return
	}
	s.log.Info("releasing an acquisition the session does not know", "lock", name, "owner", owner)
	s.metrics.unknownReleased()
	s.releaseInBackground(name, owner)
}

// releaseUnknownLocks releases every acquisition the local replica shows
// the session holding or waiting for whose owner it does not know (after
// missed events or a snapshot install): grants of every kind — exclusive,
// read, a semaphore's permits — and waits alike.
func (s *Session) releaseUnknownLocks() {
	for _, a := range s.r.SessionAcquisitions(s.id) {
		if !s.knows(a.Owner) {
			s.releaseUnknown(a.Lock, a.Owner)
		}
	}
}
