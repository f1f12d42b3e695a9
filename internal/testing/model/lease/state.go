package lease

// The model's state. Every time in it is relative — a countdown to a
// deadline or an age since an event, capped where larger values behave
// alike — so the state space is finite without a time horizon, and two
// states that differ only in when they happen are one state. The state is
// a comparable value of small integers: it is hashed as it is.

const (
	maxClients = 3 // clients (sessions) in a configuration
	maxPending = 4 // uncommitted entries at the leader
	maxKA      = 4 // keepalives of one client in flight (the checks use up to 2; a replay of a run, where the network delivers copies, up to 4)
)

// State is one state of the protocol: the leader's memory, the replicated
// state machine (what every replica applied), the clients, and the
// monitors of the properties.
type State struct {
	L leader
	F machine
	C [maxClients]client
	M monitor
}

// Leader phases. A leader is elected, commits its takeover barrier
// (phaseRead: expiryManager.takeOver has read the sessions and its clock,
// and installs the deadlines next), then leads.
const (
	phaseNone uint8 = iota
	phaseElected
	phaseRead
	phaseLeading
)

// leader is the current leader's memory (lost at every leader change: a
// new leader knows only the log and its own clock).
type leader struct {
	Phase   uint8
	Changes uint8 // leader changes so far (bounded by Bounds.Changes)
	Fast    bool  // its clock runs at 1 + ε
	Wall    int8  // its wall clock's offset from real time
	Idle    uint8 // ticks without a leader that has taken over (Timely: at most Outage)
	Stale   uint8 // ticks left in which the deposed leader may still acknowledge keepalives
	ReadAge uint8 // ticks since the takeover read its clock (phaseRead)
	Led     uint8 // Timely: ticks it has led since its takeover (capped at MinLead)

	DL       [maxClients]uint8 // ticks until each session's deadline
	Edge     [maxClients]bool  // Bounds.Edges: the deadline falls within the current tick (DL became 0 at its start)
	Known    [maxClients]bool  // the session has a deadline here
	Expiring [maxClients]bool  // ExpireSessions proposed
	Replayed [maxClients]bool  // opened between the takeover's read and its install
	Renewing [maxClients]bool  // a Renewed entry for the session is proposed and not committed

	DelayArmed bool
	DelayT     uint8 // ticks until the armed lock-delay ends

	Pend    [maxPending]entry
	NPend   uint8
	PendAge uint8 // ticks since the oldest uncommitted entry was proposed
}

// Entry kinds: the commands of the log, at the level of the design.
const (
	eNone       uint8 = iota
	eOpen             // OpenSession (C)
	eClose            // CloseSession (C; Arg 1: Lapsed)
	eAcquire          // Acquire (C; Arg: request number; Arg2 1: a TryLock, which does not wait)
	eRelease          // Release (C; Arg: the acquisition's request number; Arg2 1: Lapsed)
	eExpire           // ExpireSessions (C)
	eEndDelay         // EndDelay (Arg: the delay's token)
	eMarker           // the takeover barrier (a Tick)
	eRenewed          // Renewed (C; Arg: the proposing leader, leader.Changes)
	eRevoke           // Revoke (Arg: token)
	eEndSession       // the operator's EndSession (C)
	eRestore          // a restore of the backup, as a replicated command
	eRaise            // RaiseTokens (Arg: the leader's wall clock, in token units)
)

type entry struct {
	Kind, C, Arg, Arg2 uint8
	Ack                uint8 // the client's ack floor (Acquire, Release)
}

// machine is the replicated state machine: sessions and one lock (an
// exclusive lock, or a semaphore when Bounds.Limit > 0).
type machine struct {
	Alive   [maxClients]bool
	Renewed [maxClients]bool  // renewed since the latest takeover marker (RenewPerTerm)
	Origin  [maxClients]uint8 // ticks since the first marker after its last renewal committed (capped)
	Tok     [maxClients]uint8 // the token of the client's grant (0: none)
	Permits [maxClients]uint8 // permits the client's acquisition asks for (semaphore)
	Owner   [maxClients]uint8 // request number of the client's acquisition in the lock (held or queued; 0: none)
	Queue   [maxClients]uint8 // the FIFO of waiting clients (client+1; 0: empty)

	Delayed   bool
	DelayTok  uint8 // the expired grant's token (EndDelay names it)
	DelayAge  uint8 // ticks since the entry that started the delay committed (capped)
	DelayWall int8  // WallDelay: the delay's end on the wall clock, relative to real now

	Counter uint8 // the grant counter
	Orphan  uint8 // token held by a session of a restored backup that nobody keeps alive (0: none)

	// Exactly-once (Bounds.Dups > 0): each session's ack floor and the
	// request numbers at or above it that executed (bit n−Floor).
	Floor [maxClients]uint8
	Done  [maxClients]uint8
	Freed [maxClients]uint8 // the latest acquisition (request number) whose release the machine applied

	// The backup an operator took (Bounds.Restores > 0).
	HasBackup  bool
	BackupTok  uint8 // the backup's grant counter
	BackupHeld uint8 // token of the backup's holder (0: free)
}

// Client kinds.
const (
	kindLease    uint8 = iota + 1 // a lockapi session with keepalives
	kindKeeper                    // an HTTP client-kept lease: the admin API's handles keep it for the HTTP client
	kindImmortal                  // a session that never lapses (its keepalives are not modelled)
)

// Client phases.
const (
	cIdle    uint8 = iota // no session yet
	cOpening              // OpenSession sent
	cOpen                 // open and not lost
	cLost                 // its validity lapsed (or the leader refused it): lost on the client
	cClosed               // closed by the client
)

// Lease window states (for the lock).
const (
	winNone   uint8 = iota
	winOpen         // the client holds the lock and may act on it
	winExempt       // taken by an operator action while open: the documented exception
)

// Commands a client has decided to send and not yet handed to a leader.
const (
	cmdNone uint8 = iota
	cmdOpen
	cmdAcquire
	cmdRelease       // Unlock while valid, or a withdrawn wait
	cmdReleaseLapsed // Lease.Unlock of a lease whose session was lost (releaseAfterEnd)
	cmdClose         // Session.Close while valid
	cmdCloseLapsed   // Session.lose's CloseSession, or the HTTP keeper's release of an unrenewed lease
)

type client struct {
	Kind      uint8
	Phase     uint8
	V         uint8 // ticks left of the client's validity (0: lapsed)
	Keep      uint8 // kindKeeper: ticks until the HTTP client must ask again
	Win       uint8
	Cmd       uint8
	CmdArg    uint8 // the command's request number (Acquire) or acquisition (Release)
	CmdAck    uint8 // the ack floor it carries
	CmdAge    uint8 // cmdOpen: ticks since it was sent
	Releasing uint8 // the acquisition whose release has not committed yet (it is retried)
	Seq       uint8 // request numbers used (the next is Seq+1)
	Ack       uint8 // requests below this are acknowledged (the ack floor it sends)
	AcqSeq    uint8 // request number of its acquisition of the lock (0: none)
	Acqs      uint8 // acquisitions made (bounded by Bounds.Acquires)
	Dups      uint8 // duplicate deliveries used (bounded by Bounds.Dups)
	Gone      uint8 // request number of an acquisition it released or withdrew (P5)
	Silent    uint8 // ticks since a leader last accepted its keepalive (P4; capped)
	Sent      uint8 // keepalives sent (bounded by Bounds.Sends)
	KA        [maxKA]ka
}

// Keepalive stages.
const (
	kaFree       uint8 = iota
	kaToLeader         // sent, not yet received
	kaConfirm          // received by the leader, its leadership round under way
	kaConfirmOld       // received by a leader since deposed, whose round may still succeed
	kaRenew            // received; waiting for the Renewed entry to commit
	kaRenewOld         // as kaRenew, at a deposed leader whose Renewed entry survived it
	kaReply            // acknowledged; the reply is on its way
	kaRefused          // refused (ErrSessionExpired); the reply is on its way
)

type ka struct {
	Stage uint8
	Age   uint8 // ticks since the client sent it
	Since uint8 // ticks since the leader received it
	Term  uint8 // the leader that received it (leader.Changes then)
}

// monitor holds what the properties need to remember.
type monitor struct {
	Guard   uint8 // P3: ticks left in which nothing may be granted (a holder's window lapsed)
	GuardBy uint8 // the client (+1) whose lapse set Guard
	Wait    uint8 // liveness: ticks the lock has had waiters and no holder (capped)
	LastTok uint8 // P2: the highest token granted (0: none)

	// Operator actions used (bounded by Bounds).
	Revokes, Ends uint8
	Restored      bool

	// Bounds.Rebuild: real time, the grants of the current tick, whether
	// the cluster was rebuilt, and the latest wall offset of the old
	// cluster's leaders.
	Now, Grants uint8
	Rebuilt     bool
	Raised      bool  // the new cluster's first RaiseTokens committed (or, with NoRaise, would have been proposed)
	RebuildAt   uint8 // when the cluster was rebuilt
	WallTop     int8
}

// tokensPerTick is how far a leader's wall clock (in token units:
// microseconds) moves in a tick, in Bounds.Rebuild configurations.
const tokensPerTick = 3

func (s *State) clients(n int) []client { return s.C[:n] }

// holder returns the exclusive holder of the lock (−1: none).
func (f *machine) holder(n int) int {
	for c := 0; c < n; c++ {
		if f.Tok[c] != 0 {
			return c
		}
	}
	return -1
}

// queueLen returns the number of waiters.
func (f *machine) queueLen() int {
	n := 0
	for n < maxClients && f.Queue[n] != 0 {
		n++
	}
	return n
}

// queued reports whether client c waits.
func (f *machine) queued(c int) bool {
	for i := 0; i < maxClients && f.Queue[i] != 0; i++ {
		if int(f.Queue[i]) == c+1 {
			return true
		}
	}
	return false
}

// dequeue removes client c from the queue.
func (f *machine) dequeue(c int) {
	j := 0
	for i := 0; i < maxClients; i++ {
		if f.Queue[i] != 0 && int(f.Queue[i]) != c+1 {
			f.Queue[j] = f.Queue[i]
			j++
		}
	}
	for ; j < maxClients; j++ {
		f.Queue[j] = 0
	}
}

func (f *machine) enqueue(c int) {
	f.Queue[f.queueLen()] = uint8(c + 1)
}

func satAdd(v uint8, cap int) uint8 {
	if int(v) >= cap {
		return uint8(cap)
	}
	return v + 1
}

func dec(v uint8) uint8 {
	if v == 0 {
		return 0
	}
	return v - 1
}
