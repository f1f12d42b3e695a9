// Package fsm is raftlock's replicated lock state machine.
//
// The state machine is pure and deterministic: it reads no clock, does no I/O,
// starts no goroutines and never panics on its input. Every replica applies the
// same committed Raft log and reaches the same state, byte for byte. Time enters
// only through the leader's timestamp carried in each log entry ([Entry.At]),
// and from cluster version 2 nothing but informational stamps depends on it.
//
// # State
//
// Sessions are identified by a counter kept in the state (never reused, never
// the raw log index). Each session has a TTL, an optional lock-delay and a free
// text description of its owner. The state machine never expires a session by
// itself: the leader's session expiry decides that a session is overdue and
// proposes [ExpireSessions].
//
// Locks are named. A lock has at most one holder, a FIFO queue of waiters and
// possibly a lock-delay (a period after its holder's session expired during
// which nobody is granted the lock). Every acquisition carries an [OwnerID]
// chosen at random by the caller; acquire and release are idempotent on
// (lock, owner), and release is a compare-and-delete by owner.
//
// # Exactly-once commands
//
// A session's commands ([Acquire], [Release], [CloseSession]) carry the
// session's request number and acknowledgement (Raft client sessions, as in
// Ongaro's thesis §6.3; see "Request numbers" in command.go): a duplicate of
// an executed request gets its original result and changes nothing, a
// request the client has acknowledged is refused as stale, and memory is
// bounded by the request window. A released or withdrawn acquisition is
// therefore never granted again by a delayed duplicate of its Acquire.
//
// # Fencing tokens
//
// Every grant of any lock increments one counter, the fencing [Token]. Tokens
// are therefore unique, strictly increasing per lock (and globally), identical
// on every replica, and they survive snapshots, restarts and leader changes.
// The token is not the log index: one entry may carry many commands.
//
// # Lock-delay and time
//
// At cluster version 1 a lock-delay ends at a leader wall-clock time (the
// previous release's rule, kept for replaying its logs). From version 2 the
// leader times it on its monotonic clock and ends it with [EndDelay]; entry
// time is informational (grant and session stamps) and one far-off stamp
// cannot freeze or advance it (see delay.go).
//
// # Renewals and takeover markers (cluster version 4)
//
// Keepalives are not in the log. To let a new leader time a session from
// when it was last renewed rather than from its own takeover, the state
// keeps per session the index of the entry that last renewed it (its
// OpenSession, or the leader's [Renewed]) and the indices of the takeover
// markers (the leader's barrier, [Takeover]): a session is timed from the first
// marker after its last renewal. See renewed.go.
//
// # Quotas
//
// [Limits] (lock name length, waiters per lock, locks and waits per session,
// sessions, requests in flight per session) are replicated state set by the
// leader with [SetLimits] and enforced deterministically: a command beyond
// one gets StatusQuota and changes nothing.
//
// # Versions
//
// Entries, commands and snapshots are versioned, and the cluster version
// ([SetClusterVersion], see version.go) decides which the leader may write.
// An entry or snapshot of a version this binary does not know is never
// skipped: the state machine halts ([ErrHalted]) — it applies nothing after
// it and refuses to snapshot — so that replicas never diverge; a restart
// with a binary that knows the version replays the log and continues.
// Whatever state the state machine can reach, it can snapshot and restore.
//
// # Read-write locks, semaphores, values (cluster version 3)
//
// A lock also has shared (read) grants — many readers or one exclusive
// holder — and a name can instead be a counting semaphore of a fixed
// number of permits; grants carry values; one FIFO queue per name serves
// every kind without starving writers or large requests; and every leader
// raises the grant counter to its clock in microseconds so that tokens
// survive a rebuilt or restored cluster. In full:
//
// One name space, three kinds of grant. A name is either a lock or a
// counting semaphore, fixed by the first acquisition while the name is in
// use (held or waited for) and forgotten once it is idle. A lock has at most
// one exclusive holder (Acquire, the mutex of earlier versions — the writer
// of a read-write lock) or any number of shared holders (Acquire with
// Shared: readers), never both. A semaphore of Limit permits (Acquire with
// Limit > 0) has holders of Permits each, at most Limit permits in all. An
// acquisition of another kind, or of a semaphore with another limit, gets
// StatusConflict: the contenders of a semaphore must agree on its limit.
//
// FIFO without starvation. Every name has one FIFO queue. A new acquisition
// is granted only if the queue is empty and the name admits it: exclusive —
// nothing held and no lock-delay; shared — no exclusive holder and no
// lock-delay; semaphore — the permits fit (used + Permits <= Limit). Otherwise it
// waits at the tail (or, without Wait, gets StatusLocked). Whenever a grant
// ends or a waiter leaves, the head of the queue is granted while the name
// admits it — the readers at the head together, up to the next writer. A
// waiting writer thus stops later readers (no writer starvation), and a
// large semaphore request at the head stops smaller ones behind it (no
// starvation of large requests).
//
// Tokens. Every grant of any kind takes the next value of the one grant
// counter, so tokens strictly increase across every grant of a name,
// whatever its kind. A writer's token is greater than the token of every
// reader granted before it and smaller than that of every reader granted
// after it; a reader's token is, likewise, between the writers before and
// after it. A resource can therefore check a read against the newest write
// it accepted (write token <= read token: no later writer has written yet),
// but readers must not record their tokens in a write fence: concurrent
// readers would reject each other.
//
// Sessions, lock-delay. Every grant belongs to its session and ends with it.
// Only the expiry of an exclusive holder starts a lock-delay (as before);
// the shared grants and the permits of an ended session are free at once.
//
// Values. An acquisition may attach a Value (at most MaxValueLen bytes) that
// its grant carries: every replica reads it with the holder (Holder.Value,
// events). SetValue replaces the value of a grant (etcd's Proclaim).
//
// Tokens across a rebuilt cluster. RaiseTokens (leader-only) raises the
// grant counter to at least the entry's leader time in microseconds. The
// leader proposes it at every takeover once the cluster version is 3. A
// cluster rebuilt from empty data dirs, restored from an older backup or
// recovered from a lost quorum thus continues above every token the old
// cluster can have granted, as long as the old cluster granted on average
// fewer than one token per microsecond since its own last raise and the new
// leader's clock is not behind the time the old cluster's last token was
// granted. The value is deterministic: the stamp is in the log.
//
// # Restore as a command (cluster version 4)
//
// A backup replaces the lock table at one index of the log: [RestoreChunk]
// entries stage its bytes (replicated state, in snapshots too, invisible in
// the lock table) and a [RestoreCommit] installs them, with
// [FSM.PrepareRestore]'s semantics read against the state at its own
// index, on every replica alike; a repeated commit changes nothing
// ([FSM.RestoreOutcome] keeps the first result).
//
// # Entries, results and events
//
// A log entry ([Entry]) carries one or more commands (group commit); they are
// applied in order exactly as if they were separate entries, and Apply returns
// a [*Response] with one [Result] per command. Business outcomes (granted,
// queued, locked, not holder, no session, stale, quota) are results; an entry
// that cannot be decoded yields a Response whose Err wraps ErrInvalidEntry
// and changes nothing — identically on every replica.
//
// Applying an entry produces [Event]s (granted, queued, released, dequeued,
// session opened/closed/expired, cluster changed) that are handed to an
// observer after the state has been updated, so that waiters anywhere can be
// woken without polling.
//
// # Costs
//
// Every operation costs what it touches: removing a waiter or a shared
// grant is O(1) amortised (queues and grant lists keep tombstones and an
// owner index), ending a session is linear in its own acquisitions whatever
// the length of the queues they are in, a session's lock count is kept,
// not counted, and creating or dropping a lock or a session also costs
// O(log n) in its ordered index (in memory only, for the listings).
//
// # Concurrency
//
// Apply, ApplyBatch, Snapshot and Restore are called by Raft from one
// goroutine. The read accessors ([FSM.Holder], [FSM.Lock], [FSM.Session],
// [FSM.Stats] ...) are safe to call from any goroutine concurrently with
// them, and none holds up an apply for more than what it returns: listings
// ([FSM.Locks], [FSM.Sessions], [FSM.SessionTTLs], [FSM.Waiters],
// [FSM.SharedGrants]) return pages of at most 1,000 from a cursor, read in
// O(log n + page), and [FSM.Halted] takes no lock. (Go's RWMutex makes new
// readers wait while an apply waits for the current ones: one long read
// would hold up every apply and every read behind it.) While a
// RestoreCommit builds the restored state they read the state before it
// (the lock is taken only to swap the two).
// # Wire vocabulary
//
// The numbers of the formats — command type bytes, entry versions, result
// statuses, event kinds, reasons, quota kinds — the hard limits of command
// arguments with their validators, the sentinel errors results map to
// ([Result.Err]: ErrLocked, ErrQuota ...) and the byte-level codec
// primitives are in internal/fsmwire, which this package, node and lockapi
// share. This package keeps the commands, the entry format ([AppendEntry],
// [DecodeEntry]), apply, the state, and snapshot and restore.
//
// # Adding a command
//
// Each command is registered once, in the command table (commandTable in
// commands.go), as in Consul's FSM command table. A new command takes:
//
//  1. its file: the type, with the unexported methods of [Command] — op
//     (its type byte), validate, version (the lowest entry version that
//     carries it), appendTo (its type byte and body) and exec (what it does
//     to the state, on an applier) — and its body decoder
//     (func(*decoder, fsmwire.Op) Command);
//  2. its type byte in internal/fsmwire (an Op constant and its name in
//     opNames; LeaderOnly if clients may propose it);
//  3. one row in commandTable: the type byte, the entry version that first
//     defines it, the decoder.
//
// A command of a new entry version also needs the cluster version that
// enables it (version.go's table, NeedsVersion) and Downgrade for the
// leader of an older cluster; a command that changes snapshot state adds a
// snapshot section (snapshot_sections.go).
package fsm
