package chaos

// What the history records of an operator's actions (the in-process
// operator class) and of what they did to the replicas.

// Operator action kinds (OperatorOp.Kind).
const (
	ActBackup     = "backup"      // node.Operator.Backup: the lock table as of a linearizable read
	ActRestore    = "restore"     // node.Operator.Restore of a backup taken earlier in the run
	ActRevoke     = "revoke"      // node.Operator.Revoke of one grant (exclusive, a reader, a semaphore's permits)
	ActEndSession = "end-session" // node.Operator.EndSession
	ActSnapshot   = "snapshot"    // node.Operator.Snapshot: a Raft snapshot now (the log is compacted)
)

// Outcomes of operator actions (OperatorOp.Result).
const (
	ActOK          = "ok"           // the call succeeded
	ActNotProposed = "not-proposed" // failed, and the library says nothing was proposed (ErrNotProposed)
	ActRefused     = "refused"      // the cluster answered no (not held, no such session, invalid, refused): nothing changed
	ActUnknown     = "unknown"      // failed otherwise: it may have taken effect (once)
)

// OperatorOp is one operator action, timed like Op.
type OperatorOp struct {
	ID   int    `json:"id"`
	Kind string `json:"kind"`
	// Node is the replica it was called on; Via says how it got there
	// (the fault it was issued under: "isolated-leader", "lost-reply",
	// "replayed", "leader-crashed", …).
	Node     string `json:"node"`
	Via      string `json:"via,omitempty"`
	Invoke   int64  `json:"invoke"`
	Return   int64  `json:"return"`
	Deadline int64  `json:"deadline,omitempty"`
	Result   string `json:"result"`
	Err      string `json:"err,omitempty"`
	// Revoke: the grant (lock and token) and its kind.
	Lock    string `json:"lock,omitempty"`
	Token   uint64 `json:"token,omitempty"`
	Shared  bool   `json:"shared,omitempty"`
	Permits int    `json:"permits,omitempty"`
	// EndSession: the session.
	Session uint64 `json:"session,omitempty"`
	// Restore: which backup (History.Backups); Backup: the one it took
	// (-1: none).
	Backup int `json:"backup"`
}

// Backup is a backup an operator took: what the state machine reads from
// it (its applied index, digest, grant counter, lock table).
type Backup struct {
	Node      string `json:"node"`
	At        int64  `json:"at"`
	Index     uint64 `json:"index"`
	Hash      string `json:"hash"`
	LastToken uint64 `json:"last_token"`
	// Holds are its holders, shared grants and waiters (in queue order);
	// Delayed its locks in lock-delay.
	Holds   []EndHold `json:"holds,omitempty"`
	Delayed []string  `json:"delayed,omitempty"`
	// Bytes is its size.
	Bytes int `json:"bytes"`
}

// Resync is a subscription's resync signal on one replica: its state was
// replaced by a snapshot (installed from the leader, or a restore). Index
// and Leading are read when the collector received it: the replica's
// applied index then, and whether it led. A leader never installs another
// replica's snapshot, so a resync while leading is a restore.
type Resync struct {
	Node    string `json:"node"`
	At      int64  `json:"at"`
	Index   uint64 `json:"index"`
	Leading bool   `json:"leading,omitempty"`
	// RestoredEvent: the replica applied a restored event at that
	// instant — the resync follows a restore of the log (cluster version
	// 4), applied then or applied again after a restart.
	RestoredEvent bool `json:"restored_event,omitempty"`
}

// CatchUp is one no-wedged-replica probe: once an episode healed, every
// running replica must apply the leader's applied index (read at Start)
// by Deadline.
type CatchUp struct {
	What     string `json:"what"`
	Start    int64  `json:"start"`
	Deadline int64  `json:"deadline"`
	Leader   string `json:"leader"`
	Index    uint64 `json:"index"`
	Done     int64  `json:"done,omitempty"` // 0: some replica never got there
	// Lagging describes the replicas behind at the deadline.
	Lagging string `json:"lagging,omitempty"`
}

// SessionClose is a client's Close of a session that was healthy when
// it called (sessions lost before are closed with expiry semantics).
type SessionClose struct {
	Session uint64 `json:"session"`
	At      int64  `json:"at"`
}
