package lockapi

import (
	"fmt"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/lockinfo"
)

// What a session holds, by name, and the rule that an acquisition never
// waits for a grant of its own session (ErrAlreadyHeld).
//
// A session's acquisitions are distinct grants (each its own owner id and
// token), queued in the one FIFO queue of the name like anyone's. An
// acquisition that could only be granted once a grant the session holds is
// released would wait for its own session: with one goroutine — the usual
// case — until its context ends. So it fails at once instead, before
// anything is sent:
//
//   - Lock/TryLock of a name the session holds exclusively or for reading
//     (a read lock is not upgraded: the writer would wait for its own
//     reader);
//   - RLock/TryRLock of a name the session holds exclusively;
//   - Acquire/TryAcquire of n permits of a semaphore of which the session
//     holds k, with k + n above the limit.
//
// A second read grant, or more permits within the limit, may be granted at
// once and is allowed: goroutines of one session read together or share a
// pool. Like sync.RWMutex's readers, such a request still queues behind a
// writer (or a larger request) that arrived first and waits for the grant
// already held: a goroutine must not wait for a second grant of a name
// while it holds the first.

// addLeaseLocked records a granted lease. s.mu is held.
func (s *Session) addLeaseLocked(l *Lease) {
	s.leases[l.owner] = l
	s.held[l.name] = append(s.held[l.name], l)
}

// dropLeaseLocked forgets the lease of owner, if the session has it. s.mu
// is held.
func (s *Session) dropLeaseLocked(owner lockinfo.OwnerID) {
	l := s.leases[owner]
	if l == nil {
		return
	}
	delete(s.leases, owner)
	same := s.held[l.name]
	for i, o := range same {
		if o == l {
			same = append(same[:i], same[i+1:]...)
			break
		}
	}
	if len(same) == 0 {
		delete(s.held, l.name)
	} else {
		s.held[l.name] = same
	}
}

// ownConflictLocked returns an error wrapping ErrAlreadyHeld if want could
// only be granted after a grant the session holds is released (see above).
// A request of another kind than the name's is left to the cluster, which
// refuses it as a conflict. s.mu is held.
func (s *Session) ownConflictLocked(want fsm.Acquire) error {
	held := s.held[want.Lock]
	if len(held) == 0 {
		return nil
	}
	var exclusive, reader *Lease
	permits := 0
	for _, l := range held {
		switch {
		case l.permits > 0:
			permits += l.permits
		case l.shared:
			reader = l
		default:
			exclusive = l
		}
	}
	var why string
	switch {
	case want.Limit > 0:
		if permits > 0 && permits+want.Permits > want.Limit {
			why = fmt.Sprintf("it holds %d of its %d permits; %d more would wait for its own release", permits, want.Limit, want.Permits)
		}
	case exclusive != nil:
		why = fmt.Sprintf("it holds it exclusively (token %d)", exclusive.token)
	case reader != nil && !want.Shared:
		why = fmt.Sprintf("it holds a read lock (token %d), which a write lock would wait for: unlock it first", reader.token)
	}
	if why == "" {
		return nil
	}
	return fmt.Errorf("lockapi: %q: %w: %s", want.Lock, ErrAlreadyHeld, why)
}
