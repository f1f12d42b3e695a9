package lockapi

import "github.com/raftlock/raftlock/internal/lockinfo"

// The state machine's types that users of lockapi name, so that they need
// not import package fsm.
type (
	// Token is a fencing token: strictly increasing per lock (and
	// globally); pass it to the protected resource (package fence takes it
	// as it is: it is a uint64).
	Token = lockinfo.Token
	// Holder describes the holder of a lock (LockedError.Holder).
	Holder = lockinfo.Holder
	// OwnerID identifies one acquisition (Lease.Owner).
	OwnerID = lockinfo.OwnerID
	// SessionID identifies a session in the cluster (Session.ID).
	SessionID = lockinfo.SessionID
)
