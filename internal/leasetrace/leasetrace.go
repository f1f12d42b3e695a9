// Package leasetrace records what the lease protocol's implementation does
// — the leader's keepalive verdicts, confirmations, takeovers, expiry and
// lock-delay proposals, every replica's applied entries, the client's
// keepalives, commands and lapses — as a trace of events, so that a test
// can check the run against the lease model (internal/testing/model/lease,
// Conform): the trace-validation method etcd-io/raft uses with its TLA+
// specification.
//
// Recording is off unless a test attaches a Sink to a node (Attach, keyed
// by the *node.Node): package node and package lockapi then report what
// that node and the sessions on it do. Off, each report point costs one
// atomic load. Nothing here is read by the implementation: a sink only
// receives.
package leasetrace

import (
	"sync"
	"sync/atomic"
)

// Kind is what an event reports.
type Kind string

// Event kinds. "Leader" events come from the expiry manager of the node
// named in the event, "replica" events from any replica, "client" events
// from a lockapi session on that node.
const (
	// Leader: the node began its leader duties in Term (before its
	// takeover barrier).
	Lead Kind = "lead"
	// Leader: it stopped leading (its duties ended).
	Unlead Kind = "unlead"
	// Leader: the takeover is installed: Sessions got Deadlines
	// (expiryManager.takeOver); keepalives are served from now on.
	Install Kind = "install"
	// Leader: a keepalive of Session was received; Verdict is
	// VerdictRefused, VerdictNotLeader, VerdictConfirm (a leadership
	// round follows) or VerdictRenew (a Renewed entry follows).
	KeepAliveReceived Kind = "keepalive-received"
	// Leader: the keepalive of Session received at Sent is answered:
	// Verdict "" (renewed, the session's deadline is Deadline),
	// VerdictRefused, VerdictNotLeader or VerdictFailed (the round or the
	// Renewed entry failed).
	KeepAliveAnswered Kind = "keepalive-answered"
	// Leader: a deadline was set outside a keepalive: a session opened
	// (Session, Deadline).
	DeadlineSet Kind = "deadline-set"
	// Leader: ExpireSessions proposed for Sessions.
	ProposeExpire Kind = "propose-expire"
	// Leader: Renewed proposed for Sessions.
	ProposeRenewed Kind = "propose-renewed"
	// Leader: EndDelay proposed for the delay of Lock started by the grant
	// of Token.
	ProposeEndDelay Kind = "propose-end-delay"
	// Replica: the entry at Index of Term was applied; Data is its
	// payload (fsm.DecodeEntry). Only command entries are reported.
	Applied Kind = "applied"
	// Replica: a snapshot replaced the state at Index.
	Restored Kind = "restored"
	// Client: OpenSession was sent at Sent and committed as Session.
	Opened Kind = "opened"
	// Client: a keepalive of Session was sent.
	KeepAliveSent Kind = "keepalive-sent"
	// Client: the keepalive of Session sent at Sent got its answer:
	// Verdict "" (renewed: the session is valid until Deadline),
	// VerdictRefused or VerdictFailed.
	KeepAliveResult Kind = "keepalive-result"
	// Client: the session was lost (Verdict says why: LostDeadline,
	// LostRefused, LostClosed, LostEnded, LostAbandoned).
	Lost Kind = "lost"
	// Client: the session proposed a command (Data: an entry of that one
	// command, fsm.DecodeEntry).
	Command Kind = "command"
)

// Verdicts and causes.
const (
	VerdictRefused   = "refused"    // ErrSessionExpired
	VerdictNotLeader = "not-leader" // the node does not lead (or no longer)
	VerdictConfirm   = "confirm"
	VerdictRenew     = "renew"
	VerdictFailed    = "failed" // no answer, or an error that is not a refusal

	LostDeadline  = "deadline"  // its validity ran out on the client
	LostRefused   = "refused"   // the leader refused a keepalive
	LostClosed    = "closed"    // the node closed
	LostEnded     = "ended"     // the cluster expired or closed it (an applied event)
	LostAbandoned = "abandoned" // Session.Abandon
)

// Event is one report. At is the reporter's clock (time.Now, Unix
// nanoseconds; fake time inside testing/synctest); Node the reporting
// node's id (filled in by the sink Attach was given, see Attach).
type Event struct {
	At        int64    `json:"at"`
	Node      string   `json:"node,omitempty"`
	Kind      Kind     `json:"kind"`
	Term      uint64   `json:"term,omitempty"`
	Index     uint64   `json:"index,omitempty"`
	Session   uint64   `json:"session,omitempty"`
	Sessions  []uint64 `json:"sessions,omitempty"`
	Deadlines []int64  `json:"deadlines,omitempty"`
	Deadline  int64    `json:"deadline,omitempty"`
	Sent      int64    `json:"sent,omitempty"`
	Lock      string   `json:"lock,omitempty"`
	Token     uint64   `json:"token,omitempty"`
	Verdict   string   `json:"verdict,omitempty"`
	Data      []byte   `json:"data,omitempty"`
}

// Sink receives events, from any goroutine.
type Sink interface {
	Record(Event)
}

var (
	attached atomic.Int32
	sinks    sync.Map // key → Sink
)

// Attach sends the events of key (a *node.Node) to s until the returned
// function is called.
func Attach(key any, s Sink) (detach func()) {
	sinks.Store(key, s)
	attached.Add(1)
	var once sync.Once
	return func() {
		once.Do(func() {
			sinks.Delete(key)
			attached.Add(-1)
		})
	}
}

// For returns the sink attached to key, or nil (the usual case: one atomic
// load).
func For(key any) Sink {
	if attached.Load() == 0 {
		return nil
	}
	if s, ok := sinks.Load(key); ok {
		return s.(Sink)
	}
	return nil
}

// Recorder is a Sink for several nodes: it collects their events in the
// order they are recorded (time order inside testing/synctest, where every
// node reads one fake clock), each stamped with its node's name, and keeps
// the first apply of each log index only (the entry's commit, at the
// latest; the replicas' later applies say nothing more). The zero value is
// ready to use.
type Recorder struct {
	mu      sync.Mutex
	events  []Event
	applied map[uint64]bool
}

// Attach records the events of key (a *node.Node) as node's until the
// returned function is called.
func (r *Recorder) Attach(key any, node string) (detach func()) {
	return Attach(key, nodeSink{r: r, node: node})
}

// Events returns a copy of what was recorded so far.
func (r *Recorder) Events() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Event(nil), r.events...)
}

func (r *Recorder) record(e Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e.Kind == Applied {
		if r.applied[e.Index] {
			return
		}
		if r.applied == nil {
			r.applied = map[uint64]bool{}
		}
		r.applied[e.Index] = true
	}
	r.events = append(r.events, e)
}

// nodeSink is one node's Sink of a Recorder.
type nodeSink struct {
	r    *Recorder
	node string
}

func (s nodeSink) Record(e Event) {
	e.Node = s.node
	s.r.record(e)
}
