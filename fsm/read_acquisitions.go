package fsm

import (
	"cmp"
	"slices"

	"github.com/raftlock/raftlock/internal/lockinfo"
)

// Acquisition names one acquisition of a session: the lock (or semaphore)
// and the owner id it was made with. It stands for whatever the owner has
// there — an exclusive, read or semaphore grant, or a place in the queue —
// and a Release of (Lock, Owner) by its session ends it.
type Acquisition struct {
	Lock  string
	Owner lockinfo.OwnerID
}

// SessionAcquisitions returns every acquisition of the session — held or
// waiting, of every kind — in lock-name order (then owner order), nil if
// the session does not exist. O(k log k) in the session's k acquisitions
// (O(k) of it under the read lock), whatever the length of the queues
// they are in.
func (f *FSM) SessionAcquisitions(id lockinfo.SessionID) []Acquisition {
	f.mu.RLock()
	s := f.st.sessions.get(id)
	if s == nil {
		f.mu.RUnlock()
		return nil
	}
	out := make([]Acquisition, 0, len(s.acqs))
	for k := range s.acqs {
		out = append(out, Acquisition{Lock: k.lock, Owner: k.owner})
	}
	f.mu.RUnlock() // sorted outside the read lock: O(k) under it
	slices.SortFunc(out, func(a, b Acquisition) int {
		if c := cmp.Compare(a.Lock, b.Lock); c != 0 {
			return c
		}
		return slices.Compare(a.Owner[:], b.Owner[:])
	})
	return out
}
