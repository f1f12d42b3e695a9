package lease

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/leasetrace"
	"github.com/raftlock/raftlock/internal/lockinfo"
)

// Conformance: a run of the implementation checked against the model
// (trace validation, as etcd-io/raft checks its runs against its TLA+
// specification). The run's trace (package leasetrace: the leaders'
// keepalive verdicts, takeovers and proposals, the clients' keepalives,
// commands and lapses, every entry's first apply) is turned into model
// steps, and every step must be one the model (Fixed, in trace semantics:
// Bounds.Trace) allows from the states the previous steps reached.
//
// Projection. The model has one lock and at most three clients; a run has
// many of both. Conform follows each session S of the run on its own
// (client 0, a Lease client), and for each lock L that S acquires, S on L:
// then client 1, an Immortal client, stands for every other session on L —
// it holds while another session holds L or L is in the lock-delay another
// session's grant left, and waits while others wait and S holds (the
// order of the others among themselves is not followed; the fifo and
// exactly-once checkers of the chaos harness check it on the log). A
// replay starts at the run's start (no leader yet, S without a session)
// and follows every leader change, every takeover marker, and what S and
// its leaders do; it ends once S's session ended and nothing of S is left
// on L (its lock-delay, P3's window).
//
// Steps checked, for S (and S on L):
//
//   - the client: the open, each keepalive sent, its answer (the window
//     moves to send time + TTL − margin: the run's new validity must be
//     the model's), the lapse (lost exactly when the model's window ends),
//     every command — Acquire and TryLock, Unlock (plain while the window
//     is open, Lapsed after), a withdrawn wait, Close, Session.lose's
//     Lapsed CloseSession;
//   - the leader: its election (the run's Lead with a higher term) and
//     deposition, its barrier's commit and its takeover (the deadline it
//     gives S: between the model's, counted from the commit of S's origin
//     marker, and a full grace from now), each keepalive's verdict on
//     arrival (refused only past the deadline or once the expiry is
//     proposed; otherwise a leadership round, or a Renewed entry for a
//     marked session), each answer (an acknowledgement only once the
//     Renewed entry committed; the deadline moved to arrival + TTL), the
//     deadline it gives a session it sees opened, its decision to expire
//     S (not before the deadline) and to end S's lock-delay (not before
//     its time);
//   - the log: every entry that touches S or L, committed where the run's
//     log has it, with the model's effect — S's session alive or ended, S
//     holding, waiting or refused, the lock free, held by another, in S's
//     lock-delay — equal to the run's state machine's after it; entries
//     of a deposed leader survive into the next leader's log exactly as
//     far as the run's log shows;
//   - every property of the model on every step (P1, P3, P5, P6 at
//     grants; P4 and liveness are not checked: the run's nemesis makes no
//     timeliness promise).
//
// Not checked: clock rates (the runs in process have one clock, so ε is
// 0 and leaders are slow), the HTTP keeper (no run of the chaos harness in
// process uses client-kept leases), operator actions (revoke, end-session,
// restore: a replay that meets one on S or L stops, and says so), a
// keepalive the network delivered twice (a replay stops at one), tokens
// (the model renumbers them; token-order checks the run's), two
// acquisitions of one lock by one session at once (the model's client has
// one), read-write locks and semaphores (a lock any session takes a shared
// grant of is not followed: the projection has one exclusive holder). A replay that stops before its end reports why (ConformReport.
// Unchecked).
//
// Time. Each real time t maps to tick floor(t/tick), tick = TTL/20 (TTL
// 20 ticks, the margin TTL/20 one tick); the election timeout and the
// lock-delays must be whole ticks. The run's durations are then exact:
// arrival + TTL falls within tick floor(arrival) + 20. What a tick hides is
// where in it a deadline falls: the model's countdown reaches 0 at the
// start of the tick that holds the deadline, and with Bounds.Edges a
// leader may still accept a keepalive in that tick, and a client is still
// valid until it lapses within it (aLapse). A step the design forbids by
// a whole tick or more is a mismatch; one within the same tick as its
// bound is not (the chaos checkers of windows and lock-delays judge those
// in real time). The mapping never makes the model stricter than the
// design: every deadline of the run lies within the tick the model gives
// it.

// ConformConfig is what Conform needs to know of the run.
type ConformConfig struct {
	TTL             time.Duration // the sessions' TTL (a session with another is not followed)
	ElectionTimeout time.Duration // the nodes' Timing.ElectionTimeout (the takeover grace's)
}

// ConformReport is the outcome of Conform.
type ConformReport struct {
	Sessions   int            // sessions followed
	Replays    int            // replays: one per session, and one per lock it acquired
	Steps      int            // the run's steps the model took (summed over replays)
	Unchecked  map[string]int // replays that stopped before their end, by reason
	Mismatches []Mismatch     // steps no model state allowed (the first of each replay)
	Elapsed    time.Duration
}

// Mismatch is a step of the run the model does not allow.
type Mismatch struct {
	Session uint64 `json:"session"`
	Lock    string `json:"lock,omitempty"`
	At      int64  `json:"at"`   // the step's time (the run's clock, ns)
	Tick    int64  `json:"tick"` // at's tick, counted from the trace's first step
	Step    string `json:"step"`
	Detail  string `json:"detail"` // why, and the model states before the step
}

func (m Mismatch) String() string {
	where := fmt.Sprintf("session %d", m.Session)
	if m.Lock != "" {
		where += " on " + m.Lock
	}
	return fmt.Sprintf("%s, tick %d of the trace: %s: %s", where, m.Tick, m.Step, m.Detail)
}

// debugHook, if set (tests), is told every step of every replay.
var debugHook func(s lockinfo.SessionID, lock string, line string)

// ticksPerTTL is the model's TTL in ticks (margin TTL/20: one tick).
const ticksPerTTL = 20

// Conform checks a run's trace against the model (see above).
func Conform(trace []leasetrace.Event, cfg ConformConfig) (*ConformReport, error) {
	start := time.Now()
	rep := &ConformReport{Unchecked: map[string]int{}}
	if cfg.TTL <= 0 || cfg.TTL%ticksPerTTL != 0 {
		return nil, fmt.Errorf("lease: conform: TTL %v is not a whole number of ticks of %d to the TTL", cfg.TTL, ticksPerTTL)
	}
	tick := int64(cfg.TTL / ticksPerTTL)
	if int64(cfg.ElectionTimeout)%tick != 0 {
		return nil, fmt.Errorf("lease: conform: election timeout %v is not a whole number of ticks of %v", cfg.ElectionTimeout, time.Duration(tick))
	}
	log, err := readLog(trace)
	if err != nil {
		return nil, err
	}
	c := &conformer{cfg: cfg, tick: tick, log: log, clientOpen: map[lockinfo.SessionID]*leasetrace.Event{}, debug: debugHook}
	c.items = c.merge(trace)
	if len(c.items) > 0 {
		c.start = c.items[0].at
	}
	seen := map[string]bool{}
	for _, s := range log.sessions() {
		if log.ttl[s] != int64(cfg.TTL) {
			rep.Unchecked["a session with another TTL"]++
			continue
		}
		if log.delay[s]%tick != 0 || log.delay[s]/tick > 60 {
			rep.Unchecked["a lock-delay that is not a whole number of ticks (or over 60)"]++
			continue
		}
		rep.Sessions++
		acquired, shared := c.locksOf(s)
		if shared > 0 {
			rep.Unchecked["a read-write lock or a semaphore (shared grants)"] += shared
		}
		locks := append([]string{""}, acquired...)
		for _, l := range locks {
			in, err := c.newReplay(s, l)
			if err != nil {
				return nil, err
			}
			rep.Replays++
			in.run()
			rep.Steps += in.r.steps
			if in.stopped != "" {
				rep.Unchecked[in.stopped]++
			}
			if mm := in.mismatch; mm != nil {
				// A mismatch of the session's own steps shows in every
				// replay of the session: once is enough.
				key := fmt.Sprintf("%d/%d/%s", mm.Session, mm.At, mm.Step)
				if !seen[key] {
					seen[key] = true
					rep.Mismatches = append(rep.Mismatches, *mm)
				}
			}
		}
	}
	rep.Elapsed = time.Since(start)
	return rep, nil
}

// conformer is what every replay of one run shares.
type conformer struct {
	cfg        ConformConfig
	tick       int64 // ns
	start      int64 // the first step's time (ns): tick 0 of a Mismatch
	log        *runLog
	items      []item
	clientOpen map[lockinfo.SessionID]*leasetrace.Event // the client's Opened
	shared     map[string]bool                          // locks with shared grants (locksOf)
	// debug, if set (tests), is told every step a replay takes.
	debug func(s lockinfo.SessionID, lock string, line string)
}

// item is one step of the run: a trace event, or a command of the log at
// its entry's first apply.
type item struct {
	at  int64
	seq int // order of recording, for steps at one instant
	ev  *leasetrace.Event
	cmd int // position in log.cmds (ev nil)
}

// merge orders the trace's events and the log's commands by time. A
// client's Opened counts from when its OpenSession was sent (Sent), which
// is before its commit.
func (c *conformer) merge(trace []leasetrace.Event) []item {
	var out []item
	firstApply := map[uint64]int{}
	for i := range trace {
		e := &trace[i]
		switch e.Kind {
		case leasetrace.Applied:
			if _, ok := firstApply[e.Index]; !ok {
				firstApply[e.Index] = i
			}
			continue
		case leasetrace.Opened:
			c.clientOpen[lockinfo.SessionID(e.Session)] = e
			out = append(out, item{at: e.Sent, seq: -1, ev: e}) // sent before anything recorded at that instant
			continue
		}
		out = append(out, item{at: e.At, seq: 2 * i, ev: e})
	}
	for k := range c.log.cmds {
		rc := &c.log.cmds[k]
		out = append(out, item{at: rc.at, seq: 2*firstApply[rc.index] + 1, cmd: k})
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].at != out[j].at {
			return out[i].at < out[j].at
		}
		if out[i].seq != out[j].seq {
			return out[i].seq < out[j].seq
		}
		return out[i].ev == nil && out[j].ev == nil && out[i].cmd < out[j].cmd
	})
	return out
}

// locksOf lists the locks session s acquires in the log, but for those
// that any session takes shared grants of (a read lock or a semaphore:
// the projection follows one exclusive lock), which it counts.
func (c *conformer) locksOf(s lockinfo.SessionID) (out []string, shared int) {
	if c.shared == nil {
		c.shared = map[string]bool{}
		for k := range c.log.cmds {
			if a, ok := c.log.cmds[k].cmd.(fsm.Acquire); ok && (a.Shared || a.Limit > 0) {
				c.shared[a.Lock] = true
			}
		}
	}
	skipped := map[string]bool{}
	for k := range c.log.cmds {
		a, ok := c.log.cmds[k].cmd.(fsm.Acquire)
		switch {
		case !ok || a.Session != s || slices.Contains(out, a.Lock) || skipped[a.Lock]:
		case c.shared[a.Lock]:
			skipped[a.Lock] = true
			shared++
		default:
			out = append(out, a.Lock)
		}
	}
	slices.SortFunc(out, cmp.Compare)
	return out, shared
}

// ticks converts a run's duration to ticks (floor).
func (c *conformer) ticks(d int64) int64 {
	if d < 0 {
		return -((-d + c.tick - 1) / c.tick)
	}
	return d / c.tick
}

// itemText describes a step of the run.
func (c *conformer) itemText(it *item) string {
	if it.ev == nil {
		rc := &c.log.cmds[it.cmd]
		return fmt.Sprintf("[index %d.%d term %d] %s %+v", rc.index, rc.pos, rc.term, fsm.OpOf(rc.cmd), rc.res.Status)
	}
	e := it.ev
	s := fmt.Sprintf("[%s] %s", e.Node, e.Kind)
	if e.Term != 0 {
		s += fmt.Sprintf(" term %d", e.Term)
	}
	if e.Verdict != "" {
		s += " " + e.Verdict
	}
	if e.Sent != 0 {
		s += fmt.Sprintf(" sent t=%d", c.ticks(e.Sent))
	}
	if e.Deadline != 0 {
		s += fmt.Sprintf(" deadline t=%d", c.ticks(e.Deadline))
	}
	if e.Kind == leasetrace.Command {
		if en, err := fsm.DecodeEntry(e.Data); err == nil {
			s += fmt.Sprintf(" %#v", en.Commands[0])
		}
	}
	return s
}
