package fsm

import (
	"time"

	"github.com/raftlock/raftlock/internal/lockinfo"
)

// DelayInfo describes one lock-delay for the leader that ends it.
type DelayInfo struct {
	DelayRef
	For time.Duration // its full length
}

// SessionTTL is what the leader's session expiry needs of a session.
// Origin (cluster version 4) is the index of the takeover marker a new
// leader times the session from: the first marker after the entry that last
// renewed it; 0 when none follows (see Renewed).
type SessionTTL struct {
	ID     lockinfo.SessionID
	TTL    time.Duration
	Origin uint64
}

func durationOf(ns int64) time.Duration { return time.Duration(ns) }
