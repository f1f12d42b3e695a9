// Package chaos tests raftlock's safety claims the way Jepsen tests lock
// services: a workload of clients that lock, perform a fenced write and
// unlock, under injected faults (partitions, one-way cuts, delays, leader
// isolation, process pauses longer than the TTL, crash and restart), records
// a history from the clients' side and from the replicated log, and checks it.
//
// The history and the checkers in this package are shared by two layers:
//
//   - in-process (this package's tests): 3–5 node clusters over
//     internal/testing/memnet inside testing/synctest, on bolt stores;
//   - multi-process (package proc): replica processes of examples/replica,
//     SIGSTOP/SIGCONT, SIGKILL and restart, and partitions made with network
//     namespaces and nftables.
//
// Checkers (Check): fencing (accepted writes carry non-decreasing tokens per
// resource, every token belongs to exactly one grant, stale writes are
// rejected, no acknowledged write is lost), the log (tokens strictly increase
// per lock, at most one holder per lock at any index, every acknowledged grant
// and release is in the committed log), disjoint client validity windows, a
// porcupine linearizability check of a lease-aware lock model per lock, and
// agreement of the replicas' state digests.
package chaos

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/raftlock/raftlock/internal/leasetrace"
)

// OpKind is the kind of a client lock operation.
type OpKind string

// Client operation kinds.
const (
	OpAcquire    OpKind = "acquire"     // Lock: waits in the FIFO queue
	OpTryAcquire OpKind = "try-acquire" // TryLock: answers at once
	OpRelease    OpKind = "release"     // Unlock of a granted lease
	// OpLeaseCheck asks the client's replica whether a lease is still valid
	// (multi-process: GET /v1/lease); Result Valid, NotHolder or Unknown.
	OpLeaseCheck OpKind = "lease-check"
	// Shared grants (History.Primitives names them): RLock and TryRLock of
	// a lock, Acquire and TryAcquire of a semaphore's permits. Their
	// releases are OpRelease.
	OpReadAcquire    OpKind = "read-acquire"
	OpTryReadAcquire OpKind = "try-read-acquire"
	OpSemAcquire     OpKind = "sem-acquire"
	OpTrySemAcquire  OpKind = "try-sem-acquire"
)

// acquires reports whether k asks for a grant (of any kind).
func (k OpKind) acquires() bool {
	switch k {
	case OpAcquire, OpTryAcquire, OpReadAcquire, OpTryReadAcquire, OpSemAcquire, OpTrySemAcquire:
		return true
	}
	return false
}

// tries reports whether k is a try-acquire of any kind (answers at once).
func (k OpKind) tries() bool {
	return k == OpTryAcquire || k == OpTryReadAcquire || k == OpTrySemAcquire
}

// Outcome is what a client learnt from an operation.
type Outcome string

// Outcomes. Fail and Unknown are both indeterminate for a grant: the
// acquisition may still have been granted in the log (and released by the
// library's clean-up); the checkers resolve them through the log.
const (
	Granted   Outcome = "granted"    // acquire: the lease was handed to the client
	Locked    Outcome = "locked"     // try-acquire: held by someone else
	Fail      Outcome = "fail"       // acquire: an error; no lease for the client
	OK        Outcome = "ok"         // release: acknowledged
	NotHolder Outcome = "not-holder" // release: the cluster answered, and the lease had been lost
	Unknown   Outcome = "unknown"    // release: no answer from the cluster
	Valid     Outcome = "valid"      // lease-check: the replica called the lease valid
)

// Op is one client lock operation, timed on one clock shared with the log
// events (fake time in process, the host's wall clock across processes), in
// nanoseconds.
type Op struct {
	ID     int     `json:"id"`
	Client int     `json:"client"`
	Node   string  `json:"node"`
	Kind   OpKind  `json:"kind"`
	Lock   string  `json:"lock"`
	Invoke int64   `json:"invoke"`
	Return int64   `json:"return"`
	Result Outcome `json:"result"`
	// Token: the granted token (acquire) or the released lease's (release).
	Token uint64 `json:"token,omitempty"`
	// Owner: the acquisition's owner id (request id), when the client knows it.
	Owner string `json:"owner,omitempty"`
	// ValidTo ends a granted acquisition's client validity window
	// [Return, ValidTo): the earliest of the client's release call, the
	// moment its lease was lost, and its lease deadline. 0: held to the end.
	ValidTo int64  `json:"valid_to,omitempty"`
	Err     string `json:"err,omitempty"`
	// ErrKind classifies Err (ErrNoQuorum, ErrSessionExpired, ErrDeadline,
	// ErrOther); "" when the call succeeded or the layer cannot tell.
	ErrKind string `json:"err_kind,omitempty"`
	// Deadline is the end of the call's context (0: none known).
	Deadline int64 `json:"deadline,omitempty"`
	// SessionEnded is when the client's session ended during the call
	// (0: it did not, or the layer cannot tell): a blocking call must
	// return soon after.
	SessionEnded int64 `json:"session_ended,omitempty"`
	// Session is the client's session (in-process; 0 when not recorded).
	Session uint64 `json:"session,omitempty"`
	// Shared and Permits describe a shared grant (a read grant, a
	// semaphore's permits); Limit is the semaphore's.
	Shared  bool `json:"shared,omitempty"`
	Permits int  `json:"permits,omitempty"`
	// Lost (a granted acquisition) is when its lease ended on the client
	// before the client's release call: a lapse, a revocation, the end of
	// its session (0: released first, or held to the end).
	Lost int64 `json:"lost,omitempty"`
}

// Error kinds of failed client calls (Op.ErrKind).
const (
	ErrNoQuorum       = "no-quorum"       // wraps ErrNoQuorum
	ErrSessionExpired = "session-expired" // wraps ErrSessionExpired (the session ended)
	ErrDeadline       = "deadline"        // only the context's error: the cause is lost
	ErrOther          = "other"
)

// Write is one attempt of a fenced write into the register.
type Write struct {
	Client int    `json:"client"`
	Lock   string `json:"lock"` // the resource is named after the lock
	Token  uint64 `json:"token"`
	Value  string `json:"value"`
	Invoke int64  `json:"invoke"`
	Return int64  `json:"return"`
	// Accepted: the fence admitted the write and it committed.
	Accepted bool `json:"accepted"`
	// Rejected: the fence refused the token as stale. A write neither
	// accepted nor rejected failed otherwise (its outcome is then unknown).
	Rejected bool `json:"rejected"`
	// Seq orders the attempts on one resource as the fence processed them
	// (in-process register); 0 when unknown.
	Seq uint64 `json:"seq,omitempty"`
	// Late: the writer deliberately wrote after a pause (stale-owner resume).
	Late bool   `json:"late,omitempty"`
	Err  string `json:"err,omitempty"`
}

// Version is one accepted write as the register's final state holds it.
type Version struct {
	Token uint64 `json:"token"`
	Value string `json:"value"`
}

// Event kinds of the log (fsm.EventKind names).
const (
	EvGranted  = "granted"
	EvReleased = "released"
	EvExpired  = "session-expired"
	EvClosed   = "session-closed"
	EvOpened   = "session-opened"
	EvQueued   = "queued"
	EvDequeued = "dequeued"
	EvRaised   = "tokens-raised" // RaiseTokens raised the counter to Token
	// EvRestored: a restore installed a backup at Index (cluster version
	// 4: a replicated command; Token is the restored grant counter).
	// Before, a restore was no entry of the log: Check adds one at the
	// index where a leader's state machine was replaced
	// (History.Resyncs).
	EvRestored = "restored"
)

// LogEvent is one event the replicated state machine emitted.
type LogEvent struct {
	Index   uint64 `json:"index"`
	Seq     int    `json:"seq"` // position among the events of its entry
	Kind    string `json:"kind"`
	Lock    string `json:"lock,omitempty"`
	Session uint64 `json:"session,omitempty"`
	Owner   string `json:"owner,omitempty"`
	Token   uint64 `json:"token,omitempty"`
	Reason  string `json:"reason,omitempty"`
	// Delayed: this release put the lock into lock-delay.
	Delayed bool `json:"delayed,omitempty"`
	// DelayFor: the delay's length, when the leader times it on its
	// monotonic clock from its own apply of this release (cluster version
	// 2 and later); 0 for a version-1 delay, which ends at a leader
	// wall-clock time.
	DelayFor int64 `json:"delay_for_ns,omitempty"`
	// Shared and Permits: a shared grant's (granted, queued, released).
	Shared  bool `json:"shared,omitempty"`
	Permits int  `json:"permits,omitempty"`
	// At is the entry's leader time: never later than its commit.
	At int64 `json:"at"`
	// Observed is the earliest time a replica was seen applying it: never
	// earlier than its commit. 0 when not observed live (log read back from
	// disk): then the event is only known to have committed after At.
	Observed int64 `json:"observed,omitempty"`
}

// Digest is one replica's state hash at an applied index.
type Digest struct {
	Node  string `json:"node"`
	Index uint64 `json:"index"`
	Hash  string `json:"hash"`
}

// FaultEvent is one injected fault: what, on which nodes, from when to when.
type FaultEvent struct {
	Kind   string `json:"kind"`
	Target string `json:"target,omitempty"`
	Start  int64  `json:"start"`
	End    int64  `json:"end"`
	// Cut lists the nodes cut off from every quorum for the whole fault (a
	// partition's minority side, an isolated leader): error-meaning checks
	// the TryLocks made on them as it checks every TryLock inside a quorum
	// loss.
	Cut []string `json:"cut,omitempty"`
}

// History is everything one run recorded.
type History struct {
	Layer string `json:"layer"` // "in-process" or "multi-process"
	// Class is the fault class of the run (see the package README, "In-process fault classes" and "Multi-process fault classes").
	Class string `json:"class,omitempty"`
	// Cluster names the cluster of this history when a run has several.
	Cluster string `json:"cluster,omitempty"`
	Seed    int64  `json:"seed"`
	Nodes   int    `json:"nodes"`
	TTL     int64  `json:"ttl_ns"`
	// ElectionTimeout is the nodes' Timing.ElectionTimeout (the takeover
	// grace's; the model-conformance check needs it).
	ElectionTimeout int64 `json:"election_timeout_ns,omitempty"`
	Start           int64 `json:"start"` // clock value at the start of the run
	End             int64 `json:"end"`   // clock value once the workload stopped
	Ops             []Op  `json:"ops"`
	// Writes are the fenced write attempts.
	Writes []Write `json:"writes"`
	// Final is the register's state at the end: resource → accepted writes
	// in the order the resource applied them.
	Final map[string][]Version `json:"final"`
	// Log is the committed log's events (merged over replicas, deduplicated).
	Log []LogEvent `json:"log"`
	// LogTokens is the state machine's grant counter at the end: the log
	// must hold exactly the grants 1..LogTokens, but for the tokens a
	// RaiseTokens skipped (EvRaised: the counter jumps to its Token).
	LogTokens uint64 `json:"log_tokens"`
	// Digests: every replica's state hash at one common applied index.
	Digests []Digest `json:"digests"`
	// LogDivergence lists indexes at which replicas' logs differ (read back
	// from disk, up to the common applied index).
	LogDivergence []string `json:"log_divergence,omitempty"`
	// Faults counts injected faults by kind.
	Faults map[string]int `json:"faults"`
	// Nemesis is the timeline of injected faults.
	Nemesis []FaultEvent `json:"nemesis,omitempty"`
	// Notes are the harness's remarks (mechanisms used, anomalies).
	Notes []string `json:"notes,omitempty"`
	// Samples are replicas' state digests sampled during the run (and
	// replayed from their logs): equal indexes must have equal digests.
	Samples []DigestSample `json:"samples,omitempty"`
	// Disagreements are events two replicas applied differently at one
	// (index, position), found while collecting the log.
	Disagreements []string `json:"disagreements,omitempty"`
	// Configs are the Raft configurations replicas held: sampled live, and
	// read from their logs and snapshots whenever a node was down.
	Configs []ConfigSample `json:"configs,omitempty"`
	// Leaders are the (term, node) pairs of replicas seen leading.
	Leaders []LeaderSample `json:"leaders,omitempty"`
	// Entries are the (index, term) → entry digests of every log read from
	// disk during the run (Raft's log matching: one entry per pair).
	Entries []EntrySample `json:"entries,omitempty"`
	// Expect is what the run's class expects of a correct cluster.
	Expect Expect `json:"expect"`
	// Probes are the availability probes the nemesis made.
	Probes []Probe `json:"probes,omitempty"`
	// EndState is the lock table once the workload had stopped and every
	// client had let go of what it held (the ghost-holder check).
	EndState *EndState `json:"end_state,omitempty"`
	// StampsUnreliable: the leaders' entry stamps (LogEvent.At) do not
	// follow the clients' clock (the clock class moves the leaders' wall
	// clocks), so the checks use observation times instead.
	StampsUnreliable bool `json:"stamps_unreliable,omitempty"`
	// LockDelay is the lock-delay of the workload's sessions (0: none; only
	// the in-process layer, on fake time, uses lock-delays).
	LockDelay int64 `json:"lock_delay_ns,omitempty"`
	// DelaySessions are the sessions the workload opened with LockDelay:
	// an expiry of one of them that releases a lock must put the lock into
	// lock-delay (the lock-delay check does not take the state machine's
	// word for which releases were delayed).
	DelaySessions []uint64 `json:"delay_sessions,omitempty"`
	// HarnessErrors are problems of the harness itself (the run proves
	// nothing then): they fail the run like a violation.
	HarnessErrors []string `json:"harness_errors,omitempty"`
	// Primitives are the names the workload takes shared grants of: a
	// read-write lock (limit 0) or a semaphore (its limit). The checks of
	// exclusive locks leave them to the primitives' checks.
	Primitives map[string]int `json:"primitives,omitempty"`
	// The operator's actions and what the harness saw of them
	// (OperatorOp, Backup).
	Operator []OperatorOp `json:"operator,omitempty"`
	Backups  []Backup     `json:"backups,omitempty"`
	// Resyncs are the subscriptions' resync signals: a replica's state
	// was replaced (a snapshot installed or a restore).
	Resyncs []Resync `json:"resyncs,omitempty"`
	// CatchUps are the no-wedged-replica probes after heals.
	CatchUps []CatchUp `json:"catch_ups,omitempty"`
	// Closes are the clients' Close calls on sessions that were healthy
	// then (a voluntary close ends a session without its lock-delay).
	Closes []SessionClose `json:"closes,omitempty"`
	// LeaseTrace is what the lease protocol's implementation did, as the
	// nodes and sessions reported it (internal/leasetrace): the leaders'
	// keepalive verdicts, takeovers and proposals, the clients'
	// keepalives, commands and lapses, and the first apply of every entry.
	// The model-conformance check replays it against the lease model.
	LeaseTrace []leasetrace.Event `json:"lease_trace,omitempty"`

	seenEntries map[EntrySample]bool // AddEntries: (index, term, hash) recorded
	seenDigests map[DigestSample]bool
}

// AddEntries records log entries read from disk, one sample per (index,
// term, hash): enough to find two different entries at one (index, term).
func (h *History) AddEntries(es []EntrySample) {
	if h.seenEntries == nil {
		h.seenEntries = map[EntrySample]bool{}
	}
	for _, e := range es {
		k := EntrySample{Index: e.Index, Term: e.Term, Hash: e.Hash}
		if !h.seenEntries[k] {
			h.seenEntries[k] = true
			h.Entries = append(h.Entries, e)
		}
	}
}

// AddSamples records digest samples, one per (node, index, hash).
func (h *History) AddSamples(ds []DigestSample) {
	if h.seenDigests == nil {
		h.seenDigests = map[DigestSample]bool{}
	}
	for _, d := range ds {
		k := DigestSample{Node: d.Node, Index: d.Index, Hash: d.Hash}
		if !h.seenDigests[k] {
			h.seenDigests[k] = true
			h.Samples = append(h.Samples, d)
		}
	}
}

// AddFault counts one injected fault.
func (h *History) AddFault(kind string) {
	if h.Faults == nil {
		h.Faults = map[string]int{}
	}
	h.Faults[kind]++
}

// SortLog orders the log by index and position.
func (h *History) SortLog() {
	sort.SliceStable(h.Log, func(i, j int) bool {
		a, b := h.Log[i], h.Log[j]
		if a.Index != b.Index {
			return a.Index < b.Index
		}
		return a.Seq < b.Seq
	})
}

// WriteJSON writes the history to path.
func (h *History) WriteJSON(path string) error {
	b, err := json.MarshalIndent(h, "", " ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// ReadHistory reads a history written by WriteJSON.
func ReadHistory(path string) (*History, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var h History
	if err := json.Unmarshal(b, &h); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &h, nil
}

// Schedule renders the fault schedule of a history: the kinds of fault in
// order, without times or targets. The seed fixes the schedule's draws;
// targets named by role ("the leader", "a holder's node") are resolved at
// run time, and goroutine scheduling decides who that is.
func Schedule(h *History) string {
	var b strings.Builder
	evs := append([]FaultEvent(nil), h.Nemesis...)
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].Start < evs[j].Start })
	for _, f := range evs {
		fmt.Fprintf(&b, "%s;", f.Kind)
	}
	return b.String()
}
