package lockapi

import (
	"encoding/hex"

	"github.com/raftlock/raftlock/internal/lockinfo"
)

// Token is a fencing token: strictly increasing per lock (and globally);
// pass it to the protected resource. It is a uint64, so that package fence
// (which imports nothing of raftlock) takes it as it is.
type Token = uint64

// SessionID identifies a session in the cluster (Session.ID): ids are
// unique and never reused; zero means none.
type SessionID uint64

// OwnerID identifies one acquisition (Lease.Owner): 128 random bits,
// chosen for each Lock call.
type OwnerID [16]byte

// String returns the owner id in hexadecimal.
func (o OwnerID) String() string { return hex.EncodeToString(o[:]) }

// Holder describes one grant (LockedError.Holder, SemaphoreInfo.Holders):
// the exclusive holder of a lock, one of its readers (Shared), or a holder
// of a semaphore's permits (Permits > 0).
type Holder struct {
	Session     SessionID
	Owner       OwnerID
	Token       Token
	AcquiredAt  int64  // leader time of the grant, Unix nanoseconds
	AcquiredIdx uint64 // log index of the grant
	Description string // the holder session's owner description
	Shared      bool   // a read grant of a lock
	Permits     int    // a semaphore's permits held by the grant; 0 for locks
	Value       string // the value attached to the grant (WithValue, Lease.SetValue)
}

// Waiter describes one entry of a lock's or semaphore's FIFO wait queue
// (SemaphoreInfo.Waiters).
type Waiter struct {
	Session    SessionID
	Owner      OwnerID
	EnqueuedAt int64  // leader time of the enqueue, Unix nanoseconds
	EnqueuedIx uint64 // log index of the enqueue
	Shared     bool   // waits for a read grant
	Permits    int    // waits for this many of a semaphore's permits; 0 for locks
	Value      string // the value the grant will carry
}

// holderOf converts the state machine's holder at the package's boundary.
func holderOf(h lockinfo.Holder) Holder {
	return Holder{Session: SessionID(h.Session), Owner: OwnerID(h.Owner), Token: h.Token, AcquiredAt: h.AcquiredAt,
		AcquiredIdx: h.AcquiredIdx, Description: h.Description, Shared: h.Shared, Permits: h.Permits, Value: h.Value}
}

// holdersOf converts a list of holders (nil stays nil).
func holdersOf(hs []lockinfo.Holder) []Holder {
	if hs == nil {
		return nil
	}
	out := make([]Holder, len(hs))
	for i, h := range hs {
		out[i] = holderOf(h)
	}
	return out
}

// waitersOf converts a list of waiters (nil stays nil).
func waitersOf(ws []lockinfo.Waiter) []Waiter {
	if ws == nil {
		return nil
	}
	out := make([]Waiter, len(ws))
	for i, w := range ws {
		out[i] = Waiter{Session: SessionID(w.Session), Owner: OwnerID(w.Owner), EnqueuedAt: w.EnqueuedAt,
			EnqueuedIx: w.EnqueuedIx, Shared: w.Shared, Permits: w.Permits, Value: w.Value}
	}
	return out
}
