package chaos

import (
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"
)

// Check names, as reported in violations.
const (
	CheckLogComplete    = "log-complete"         // the log holds every grant 1..LogTokens exactly once
	CheckTokenUnique    = "token-unique"         // every token belongs to exactly one grant
	CheckTokenOrder     = "token-order"          // tokens strictly increase per lock across grants
	CheckOneHolder      = "one-holder"           // at most one holder per lock at any log index
	CheckReleaseHolder  = "release-holder"       // only the holder's grant is released
	CheckAckGrant       = "ack-grant"            // every acknowledged grant is in the committed log (no minority grant)
	CheckAckRelease     = "ack-release"          // every acknowledged release is in the committed log
	CheckAckWrite       = "ack-write"            // every acknowledged write is in the final state
	CheckPhantomWrite   = "phantom-write"        // the final state holds only writes that were attempted and not rejected
	CheckFenceOrder     = "fence-order"          // accepted writes carry non-decreasing tokens per resource
	CheckFenceToken     = "fence-token"          // every written token belongs to a grant of that lock
	CheckStaleAccepted  = "stale-accepted"       // a write with a token below the highest accepted was admitted
	CheckFalseReject    = "fence-false-reject"   // a write was refused without a higher token accepted before it
	CheckValidity       = "validity-overlap"     // client validity windows of one lock never overlap
	CheckLeaseBeforeLog = "lease-before-handoff" // the log ends a hold only after the client's window closed
	CheckLogRealTime    = "log-realtime"         // log order agrees with the clients' real-time order
	CheckPorcupine      = "linearizable"         // porcupine: the lock with lease expiry, per lock
	CheckReplicasAgree  = "replicas-agree"       // same state hash at the same applied index
	CheckStaleValidity  = "stale-validity"       // a replica called a lease valid after the log had ended it

	// CheckPorcupineUndecided: porcupine gave no verdict within its budget
	// (Unknown). Not a pass, and not a proven violation either: reported
	// under its own name so that a run's figures tell the two apart.
	CheckPorcupineUndecided = "linearizable-undecided"

	CheckLogMatching      = "log-matching"      // one entry per (index, term) across every log read
	CheckElectionSafety   = "election-safety"   // at most one leader per term
	CheckClusterIdentity  = "cluster-identity"  // one bootstrapped configuration, only this cluster's members, one cluster id
	CheckUnreachableVoter = "unreachable-voter" // a member Raft cannot reach never becomes a voter
	CheckOddVoters        = "odd-voters"        // an even number of voters does not last
	CheckGhostHolder      = "ghost-holder"      // at the end every holder and waiter belongs to an acquisition a client knows
	CheckAvailability     = "availability"      // the cluster serves where the class expects it to (and resumes after healing)
	CheckLockDelay        = "lock-delay"        // a lock in lock-delay is not granted early
	CheckErrorMeaning     = "error-meaning"     // a call that could not commit says why (ErrNoQuorum)
	CheckBoundedCall      = "bounded-call"      // no call outlives its deadline
	CheckExactlyOnce      = "exactly-once"      // an acquisition is granted at most once, never after it ended
	CheckFIFO             = "fifo"              // no waiter is granted ahead of one queued before it
)

// Violation is one failed check.
type Violation struct {
	Check  string `json:"check"`
	Lock   string `json:"lock,omitempty"`
	Detail string `json:"detail"`
}

// Stats are the figures of one checked history.
type Stats struct {
	ClientOps      int `json:"client_ops"`
	Grants         int `json:"grants_acknowledged"`
	LogEvents      int `json:"log_events"`
	LogGrants      int `json:"log_grants"`
	GhostOps       int `json:"indeterminate_resolved"` // log-side operations no client observed (resolved through the log)
	PorcupineOps   int `json:"porcupine_ops"`
	Writes         int `json:"writes"`
	WritesAccepted int `json:"writes_accepted"`
	StaleRejected  int `json:"stale_writes_rejected"`
	LateWrites     int `json:"late_writes"` // writes attempted after the writer's validity window closed
	// LateReleases: releases called after the lease had ended (release
	// races: they must never release a newer holder's grant).
	LateReleases     int `json:"late_releases"`
	UnfencedOverlaps int `json:"unfenced_overlaps"` // of those, writes attempted once a newer holder had been granted
	AckLost          int `json:"acknowledged_lost"` // acknowledged grants, releases or writes missing
	Expiries         int `json:"lease_expiries"`    // holds ended by the cluster expiring the session
	// UnlockAfterExpiry: Unlock returned success, but its Release found the
	// grant already ended by the session's expiry or close during the call.
	UnlockAfterExpiry int `json:"unlock_ok_after_expiry"`
	Digests           int `json:"replicas_compared"` // replicas whose digests were compared
	PorcupineMillis   int `json:"porcupine_ms"`
	// IndexesCompared: applied indexes at which digests of two or more
	// replicas were sampled during the run.
	IndexesCompared int `json:"indexes_compared"`
	// EntriesCompared: log entries read from disk compared with another
	// copy of the same (index, term).
	EntriesCompared int `json:"entries_compared"`
	ConfigSamples   int `json:"config_samples"`
	Probes          int `json:"probes"`
	// ResumeMillis: after the last fault healed, how long until a probe
	// was granted (the worst of the run's resume probes).
	ResumeMillis int `json:"resume_ms"`
	// EndHolds: holders and waiters in the final lock table.
	EndHolds int `json:"end_holds"`
	// OperatorActions: the operator's calls (backups, restores,
	// revocations, ends of sessions, snapshots); RestoresInstalled: the
	// restores' installs in the log.
	OperatorActions   int `json:"operator_actions,omitempty"`
	RestoresInstalled int `json:"restores_installed,omitempty"`
	// RefusedAfterEffect: revocations answered "not held" and ends of
	// sessions answered "no such session" whose grant or session the log
	// shows ended by a revocation or close committed during the call —
	// the call's own first attempt, its reply lost and the call sent
	// again (it took effect once; the answer says nothing changed).
	RefusedAfterEffect int `json:"operator_refused_after_effect,omitempty"`
	// Model: the model-conformance check's figures.
	Model ModelStats `json:"model"`
}

// Report is the outcome of checking one history.
type Report struct {
	Stats
	Porcupine  porcupine.CheckResult `json:"porcupine"`
	Violations []Violation           `json:"violations"`
	// Known are failures of checks listed in CheckOptions.Known.
	Known []Violation `json:"known_issues,omitempty"`
	// info and model are kept for the HTML visualisation.
	info  porcupine.LinearizationInfo
	model porcupine.Model
	ops   []porcupine.Operation
	// timeout bounds each diagnostic re-check of ops.
	timeout time.Duration
}

// OK reports whether the history passed every check (porcupine Ok
// included: Unknown is not a pass).
func (r *Report) OK() bool { return len(r.Violations) == 0 && r.Porcupine == porcupine.Ok }

// ViolatedChecks counts the violations by check.
func (r *Report) ViolatedChecks() map[string]int {
	out := map[string]int{}
	for _, v := range r.Violations {
		if v.Detail != "more violations of this check not listed" {
			out[v.Check]++
		}
	}
	return out
}

// CheckOptions tune Check.
type CheckOptions struct {
	// PorcupineTimeout bounds the linearizability check (default 30s);
	// a timeout yields Unknown, which is not a pass.
	PorcupineTimeout time.Duration
	// ClockSlack tolerates clock conversions between the clients' and the
	// log's timestamps (multi-process: deadlines reported in milliseconds).
	ClockSlack int64
	// Known lists checks whose failures are known, tracked library bugs:
	// they are reported (Report.Known) but do not fail the run, and the
	// operations behind them do not feed the other checks.
	Known []string
}

// infinity stands for "no known return" in porcupine histories.
const infinity = math.MaxInt64 / 4

type checker struct {
	h   *History
	o   CheckOptions
	r   *Report
	log []LogEvent
	// grantByToken: the log's grant of each token.
	grantByToken map[uint64]LogEvent
	// releaseOf: the log event that ended each token's hold.
	releaseOf map[uint64]LogEvent
	// opGrant / opRelease: client ops by token.
	opGrant   map[uint64]*Op
	opRelease map[uint64]*Op
	// lo[k], hi[k]: the real-time window in which log event k committed;
	// matched[k]: the client operation that observed it.
	lo, hi  []int64
	matched []*Op
	pos     map[uint64]int // release events by token → position in log
	// validTo: each granted token's client window end, extended by the
	// lease checks that called it valid.
	validTo map[uint64]int64
	// staleChecks: lease checks (op IDs) that called an ended lease valid.
	staleChecks map[int]bool
	// failed counts violations per check (reports are capped).
	failed map[string]int
	// installs are the restores installed (findInstalls), by the
	// position of their restored event in log too.
	installs  []*restoreInstall
	installAt map[int]*restoreInstall
	// grantPos: the position of each token's grant in log.
	grantPos map[uint64]int
}

func (c *checker) fail(check, lock, format string, args ...any) {
	v := Violation{Check: check, Lock: lock, Detail: fmt.Sprintf(format, args...)}
	if c.known(check) {
		c.r.Known = append(c.r.Known, v)
		return
	}
	if c.failed == nil {
		c.failed = map[string]int{}
	}
	c.failed[check]++
	switch k := c.failed[check]; {
	case k <= maxReported:
		c.r.Violations = append(c.r.Violations, v)
	case k == maxReported+1:
		c.r.Violations = append(c.r.Violations, Violation{Check: check, Detail: "more violations of this check not listed"})
	}
}

func (c *checker) known(check string) bool {
	for _, k := range c.o.Known {
		if k == check {
			return true
		}
	}
	return false
}

// Check runs every checker on h.
func Check(h *History, o CheckOptions) *Report {
	if o.PorcupineTimeout <= 0 {
		o.PorcupineTimeout = 30 * time.Second
	}
	h.SortLog()
	c := &checker{
		h: h, o: o, r: &Report{}, log: h.Log,
		grantByToken: map[uint64]LogEvent{}, releaseOf: map[uint64]LogEvent{},
		opGrant: map[uint64]*Op{}, opRelease: map[uint64]*Op{}, grantPos: map[uint64]int{},
	}
	if ms := c.restoreMarkers(); len(ms) > 0 {
		c.log = append(append([]LogEvent(nil), h.Log...), ms...)
		sort.SliceStable(c.log, func(i, j int) bool {
			a, b := c.log[i], c.log[j]
			if a.Index != b.Index {
				return a.Index < b.Index
			}
			return a.Seq < b.Seq
		})
	}
	c.findInstalls()
	c.r.ClientOps = len(h.Ops)
	c.r.LogEvents = len(h.Log)
	c.r.OperatorActions = len(h.Operator)
	for _, e := range h.HarnessErrors {
		c.fail("harness", "", "%s", e)
	}
	c.checkLog()
	c.checkOwners()
	c.indexOps()
	c.bounds()
	c.checkAcks()
	c.checkLeaseChecks()
	c.checkWrites()
	for _, op := range c.h.Ops {
		if op.Kind == OpRelease && c.validTo[op.Token] != 0 && op.Invoke > c.validTo[op.Token] {
			c.r.LateReleases++
		}
	}
	c.checkValidity()
	c.checkPrimitives()
	c.checkDigests()
	c.checkSamples()
	c.checkLogMatching()
	c.checkLeaders()
	c.checkConfigs()
	c.checkGhosts()
	c.checkProbes()
	c.checkLockDelay()
	c.checkErrors()
	c.checkOperator()
	c.checkCatchUps()
	c.checkUnknown()
	c.checkModel()
	c.checkLinearizable()
	return c.r
}

// checkLog replays the log: unique, complete, per-lock increasing tokens; one
// holder per lock at any index; releases only of the holder. A restore
// replaces the holders with its backup's (restoredHolds), whose tokens
// are then held — and released — again; its grant counter must not be
// below a token granted before it. Shared-grant names (History.Primitives)
// are left to checkPrimitives but for the tokens' uniqueness.
func (c *checker) checkLog() {
	type hold struct {
		token uint64
		owner string
		index uint64
	}
	holder := map[string]hold{}
	last := map[string]uint64{}
	// held: the tokens held now (every kind), for the restores' records.
	held := map[uint64]bool{}
	released := map[uint64]bool{}
	var top LogEvent // the grant of the highest token so far
	for pos, e := range c.log {
		switch e.Kind {
		case EvRestored:
			in := c.installAt[pos]
			in.held = held
			held = map[uint64]bool{}
			clear(holder)
			if e.Token != 0 && e.Token < top.Token {
				c.fail(CheckTokenUnique, top.Lock, "the restore at index %d set the grant counter to %d, below token %d granted at index %d: a later grant can take a token again", e.Index, e.Token, top.Token, top.Index)
			}
			for _, r := range in.restoredHolds() {
				if r.Waiter {
					continue
				}
				held[r.Token] = true
				delete(released, r.Token)
				if !r.Shared && r.Permits == 0 {
					holder[r.Lock] = hold{r.Token, r.Owner, e.Index}
				}
			}
		case EvGranted:
			c.r.LogGrants++
			if prev, dup := c.grantByToken[e.Token]; dup {
				c.fail(CheckTokenUnique, e.Lock, "token %d granted twice: index %d (%s) and index %d (%s)", e.Token, prev.Index, prev.Lock, e.Index, e.Lock)
				continue
			}
			c.grantByToken[e.Token] = e
			c.grantPos[e.Token] = pos
			held[e.Token] = true
			if e.Token > top.Token {
				top = e
			}
			if c.primitive(e.Lock) {
				continue
			}
			if h, held := holder[e.Lock]; held {
				c.fail(CheckOneHolder, e.Lock, "index %d grants token %d while token %d (granted at index %d) still holds", e.Index, e.Token, h.token, h.index)
			}
			if e.Token <= last[e.Lock] {
				c.fail(CheckTokenOrder, e.Lock, "index %d grants token %d after token %d", e.Index, e.Token, last[e.Lock])
			}
			last[e.Lock] = max(last[e.Lock], e.Token)
			holder[e.Lock] = hold{e.Token, e.Owner, e.Index}
		case EvReleased:
			if _, first := c.releaseOf[e.Token]; !first {
				c.releaseOf[e.Token] = e
			}
			if e.Reason == "session-expired" {
				c.r.Expiries++
			}
			delete(held, e.Token)
			if c.primitive(e.Lock) {
				continue
			}
			h, isHeld := holder[e.Lock]
			if !isHeld || h.token != e.Token || (e.Owner != "" && h.owner != "" && e.Owner != h.owner) {
				c.fail(CheckReleaseHolder, e.Lock, "index %d releases token %d (owner %s) but the holder is %+v (held %v)", e.Index, e.Token, e.Owner, h, isHeld)
			}
			if released[e.Token] {
				c.fail(CheckReleaseHolder, e.Lock, "token %d released twice (index %d)", e.Token, e.Index)
			}
			released[e.Token] = true
			delete(holder, e.Lock)
		}
	}
	if c.h.LogTokens > 0 {
		c.checkLogComplete()
	}
}

// checkLogComplete: the log holds every grant the state machine counted.
// One counter numbers every grant, so in log order the tokens run 1, 2, 3…
// except where a RaiseTokens (EvRaised) made the counter jump: a gap
// anywhere else is a grant missing from the log. (Walks the log once:
// raised counters are clock values, far too many to enumerate.)
func (c *checker) checkLogComplete() {
	next, missing, first := uint64(1), uint64(0), uint64(0)
	for _, e := range c.h.Log {
		switch {
		case (e.Kind == EvRaised || e.Kind == EvRestored) && e.Token >= next:
			next = e.Token + 1
		case e.Kind == EvGranted && e.Token >= next:
			if e.Token > next && missing == 0 {
				first = next
			}
			missing += e.Token - next
			next = e.Token + 1
		}
	}
	if end := c.h.LogTokens; end >= next {
		if missing == 0 {
			first = next
		}
		missing += end - next + 1
		next = end + 1
	}
	if missing > 0 {
		c.fail(CheckLogComplete, "", "%d of the grants up to %d are missing from the log (first: token %d)", missing, c.h.LogTokens, first)
	}
	if next-1 > c.h.LogTokens {
		c.fail(CheckLogComplete, "", "the log holds grants up to token %d, the state machine counted %d", next-1, c.h.LogTokens)
	}
}

func (c *checker) indexOps() {
	for i := range c.h.Ops {
		op := &c.h.Ops[i]
		switch {
		case op.Kind.acquires() && op.Result == Granted:
			c.r.Grants++
			if prev := c.opGrant[op.Token]; prev != nil {
				c.fail(CheckTokenUnique, op.Lock, "token %d acknowledged to two acquisitions (ops %d and %d)", op.Token, prev.ID, op.ID)
				continue
			}
			c.opGrant[op.Token] = op
		case op.Kind == OpRelease && op.Result != Unknown:
			if prev := c.opRelease[op.Token]; prev == nil || prev.Result == Unknown {
				c.opRelease[op.Token] = op
			}
		}
	}
}

// checkAcks: every acknowledged grant and release is in the committed log.
func (c *checker) checkAcks() {
	for _, op := range c.h.Ops {
		switch {
		case op.Kind.acquires() && op.Result == Granted:
			g, ok := c.grantByToken[op.Token]
			switch {
			case !ok:
				c.r.AckLost++
				c.fail(CheckAckGrant, op.Lock, "op %d (client %d on %s): token %d acknowledged but not granted in the committed log", op.ID, op.Client, op.Node, op.Token)
			case g.Lock != op.Lock || (op.Owner != "" && g.Owner != "" && g.Owner != op.Owner):
				c.r.AckLost++
				c.fail(CheckAckGrant, op.Lock, "op %d: token %d acknowledged for %s/%s, the log granted it to %s/%s", op.ID, op.Token, op.Lock, op.Owner, g.Lock, g.Owner)
			}
		case op.Kind == OpRelease && op.Result == OK:
			// Unlock acknowledged: the grant no longer holds once it
			// returned — released by it, or (the call took long, and the
			// lease ran out meanwhile) by the session's expiry or close.
			r, ok := c.releaseOf[op.Token]
			switch {
			case !ok:
				c.r.AckLost++
				c.fail(CheckAckRelease, op.Lock, "op %d (client %d): release of token %d acknowledged, but the log never releases it", op.ID, op.Client, op.Token)
			case !c.h.StampsUnreliable && r.At > op.Return:
				c.r.AckLost++
				c.fail(CheckAckRelease, op.Lock, "op %d (client %d): release of token %d acknowledged at %d, but the log released it later (index %d, %s, leader time %d)", op.ID, op.Client, op.Token, op.Return, r.Index, r.Reason, r.At)
			case r.Reason != "owner":
				c.r.UnlockAfterExpiry++
			}
		}
	}
}

func (c *checker) checkDigests() {
	for _, d := range c.h.LogDivergence {
		c.fail(CheckReplicasAgree, "", "log differs: %s", d)
	}
	c.r.Digests = len(c.h.Digests)
	if len(c.h.Digests) == 0 {
		return
	}
	d0 := c.h.Digests[0]
	for _, d := range c.h.Digests[1:] {
		if d.Index != d0.Index || d.Hash != d0.Hash {
			c.fail(CheckReplicasAgree, "", "%s at index %d has %s, %s at index %d has %s", d0.Node, d0.Index, d0.Hash, d.Node, d.Index, d.Hash)
		}
	}
}
