// Package fsm is raftlock's replicated lock state machine.
//
// The state machine is pure and deterministic: it reads no clock, does no I/O,
// starts no goroutines and never panics on its input. Every replica applies the
// same committed Raft log and reaches the same state, byte for byte. Time enters
// only through the leader's timestamp carried in each log entry ([Entry.At]).
//
// # State
//
// Sessions are identified by a counter kept in the state (never reused, never
// the raw log index). Each session has a TTL, an optional lock-delay and a free
// text description of its owner. The state machine never expires a session by
// itself: the leader's lease manager decides that a session is overdue and
// proposes [ExpireSessions].
//
// Locks are named. A lock has at most one holder, a FIFO queue of waiters and
// possibly a lock-delay (a period after its holder's session expired during
// which nobody is granted the lock). Every acquisition carries an [OwnerID]
// chosen at random by the caller; acquire and release are idempotent on
// (lock, owner), and release is a compare-and-delete by owner.
//
// # Fencing tokens
//
// Every grant of any lock increments one counter, the fencing [Token]. Tokens
// are therefore unique, strictly increasing per lock (and globally), identical
// on every replica, and they survive snapshots, restarts and leader changes.
// The token is not the log index: one entry may carry many commands.
//
// # Entries, results and events
//
// A log entry ([Entry]) carries one or more commands (group commit); they are
// applied in order exactly as if they were separate entries, and Apply returns
// a [*Response] with one [Result] per command. Business outcomes (granted,
// queued, locked, not holder, no session) are results; an entry that cannot be
// decoded yields a Response whose Err wraps [ErrInvalidEntry] and changes
// nothing — identically on every replica.
//
// Applying an entry produces [Event]s (granted, queued, released, dequeued,
// session opened/closed/expired) that are handed to an observer after the
// state has been updated, so that waiters anywhere can be woken without
// polling.
//
// # Concurrency
//
// Apply, ApplyBatch, Snapshot and Restore are called by Raft from one
// goroutine. The read accessors ([FSM.Holder], [FSM.Waiters], [FSM.Session],
// [FSM.Stats] ...) are safe to call from any goroutine concurrently with them.
package fsm
