package node

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/leasetrace"
	"github.com/raftlock/raftlock/internal/lockinfo"
)

// expiryManager runs on the leader. It keeps every session's deadline in
// memory (keepalives are not written to the log while the leader stays),
// proposes ExpireSessions for sessions past their deadline and ends
// lock-delays (expiry_delays.go). Followers keep no deadlines: a new leader
// first commits a barrier, then gives every session TTL + ElectionTimeout
// (the takeover grace), so that a keepalive acknowledged by the old leader
// is never cut short — counted from now, or, for a session marked at
// cluster version 4, from this replica's apply of the session's origin
// marker (applyTimes): the first takeover after the session last renewed
// in the log (fsm.Renewed). A session that stopped renewing at T
// thus ends by T + 2·(TTL + ElectionTimeout) + 2·E + 3·δ + λ, whatever the
// number of leader changes (see the package doc, "Sessions across leader
// changes").
//
// Deadlines sit in a heap: opening a session, a keepalive and an expiry cost
// O(log n), and the expiry loop touches only the sessions that are due. All
// times are the leader's monotonic clock.
type expiryManager struct {
	h     expiryHost
	poke  chan struct{}
	grace time.Duration
	// takeoverRead, if set, is called by takeOver between its read of the
	// sessions and its replay of what was applied meanwhile (tests stall
	// it there).
	takeoverRead atomic.Pointer[func()]

	mu       sync.Mutex
	leading  bool          // deadlines are initialised for this leadership term
	takeover []takeoverEvt // while a new leader reads the state: what changed meanwhile
	sessions map[lockinfo.SessionID]*deadline
	due      timeHeap[*deadline]
	wakeAt   time.Time // when the loop runs next on its own
	delays   delayTimers
}

// expiryHost is what the expiry manager needs of its node — a narrow seam,
// so that expiry and lock-delay timing are unit-tested on fake time with a
// bare state machine and no Raft (expiry_unit_test.go).
type expiryHost struct {
	fsm        *fsm.FSM                                            // the local state machine (read only)
	times      *applyTimes                                         // when this replica applied markers and delay starts
	propose    func(ctx context.Context, cmd fsm.Command) outcome  // propose as leader, without forwarding or retries
	confirm    func(ctx context.Context, wait time.Duration) error // confirm leadership (a batched leadership round, which may wait for others)
	duties     func(ctx context.Context)                           // the leader's other duties, after the takeover
	wallNow    func() time.Time                                    // the leader's wall clock (version-1 lock-delay ticks only)
	expired    func(n int)                                         // metric: sessions expired by this leader
	delayEnded func(ok bool)                                       // metric: EndDelay proposals
	log        *slog.Logger
	grace      time.Duration          // the takeover grace: ElectionTimeout
	heartbeat  time.Duration          // retry pause; bounds a keepalive's wait for a shared round
	retry      time.Duration          // re-propose an expiry that did not commit after this
	term       func() uint64          // the current Raft term (the lease trace)
	trace      func() leasetrace.Sink // the node's lease trace (Node.leaseTrace); nil: none
}

type deadline struct {
	id       lockinfo.SessionID
	ttl      time.Duration
	deadline time.Time
	// marked: a takeover marker follows the session's last renewal in the
	// log, so its keepalives are acknowledged only once a Renewed entry
	// naming it committed (keepAliveMany); cleared by that commit.
	marked   bool
	expiring bool      // past its deadline; ExpireSessions proposed
	proposed time.Time // when ExpireSessions was (last) proposed
	at       time.Time // heap key: the deadline, or when to propose the expiry again
	slot     int
}

func (l *deadline) dueAt() time.Time { return l.at }
func (l *deadline) setSlot(i int)    { l.slot = i }

// takeoverEvt is an event applied while a new leader read the sessions.
type takeoverEvt struct {
	kind fsmwire.EventKind
	id   lockinfo.SessionID
	ttl  time.Duration
	ttls []fsm.SessionTTL // EventRestored: the sessions the restore left
}

func newExpiryManager(h expiryHost) *expiryManager {
	return &expiryManager{h: h, poke: make(chan struct{}, 1), grace: h.grace}
}

// expiryHost returns the node's side of the seam.
func (n *Node) expiryHost() expiryHost {
	return expiryHost{
		fsm:     n.fsm,
		times:   &n.applyTimes,
		propose: n.proposeAsLeader,
		confirm: n.verifier.confirmWithin,
		duties:  n.clusterDuties,
		wallNow: n.wallNow,
		expired: func(c int) { n.metrics.expiryProposals.Add(float64(c)) },
		delayEnded: func(ok bool) {
			n.metrics.delayEnds.WithLabelValues(map[bool]string{true: "ok", false: "error"}[ok]).Inc()
		},
		log:       n.log,
		grace:     n.cfg.Timing.ElectionTimeout,
		heartbeat: n.cfg.Timing.HeartbeatTimeout,
		retry:     n.cfg.AttemptTimeout,
		term:      func() uint64 { return n.raft.CurrentTerm() },
		trace:     n.leaseTrace,
	}
}

func (m *expiryManager) wake() {
	select {
	case m.poke <- struct{}{}:
	default:
	}
}

// lead runs the leader's duties until ctx ends (leadership lost or node closed).
func (m *expiryManager) lead(ctx context.Context) {
	if s := m.h.traceSink(); s != nil {
		term := m.h.term()
		s.Record(leasetrace.Event{At: time.Now().UnixNano(), Kind: leasetrace.Lead, Term: term})
		defer func() { s.Record(leasetrace.Event{At: time.Now().UnixNano(), Kind: leasetrace.Unlead, Term: term}) }()
	}
	defer func() {
		m.mu.Lock()
		m.leading, m.sessions, m.due, m.takeover = false, nil, timeHeap[*deadline]{}, nil
		m.delays.reset()
		m.mu.Unlock()
	}()
	// The takeover barrier: commit an entry of this term through the FSM
	// (a Tick; from cluster version 4 a Takeover, which is also the
	// takeover marker). Once it is applied, the FSM reflects every entry of
	// earlier terms, and — unlike raft's own Barrier, which the FSM never
	// sees — raft's commit index points at an entry the FSM applies, so
	// read-index waits can complete.
	for {
		var barrier fsm.Command = fsm.Tick{}
		if m.h.fsm.ClusterVersion() >= versionRenewed {
			barrier = fsm.Takeover{}
		}
		out := m.h.propose(ctx, barrier)
		if out.err == nil {
			break
		}
		m.h.log.Debug("takeover barrier failed", "err", out.err)
		if sleepCtx(ctx, m.h.heartbeat) != nil {
			return
		}
	}
	n := m.takeOver()
	m.h.log.Info("leading", "sessions", n, "grace", m.grace)
	duties := make(chan struct{})
	go func() {
		defer close(duties)
		m.h.duties(ctx)
	}()
	defer func() { <-duties }()

	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		if m.h.fsm.Halted() != nil { // it cannot apply what it would propose
			<-ctx.Done()
			return
		}
		next := m.expire(ctx)
		if t, ok := m.endDelays(ctx); ok && t.Before(next) {
			next = t
		}
		m.mu.Lock()
		m.wakeAt = next
		m.mu.Unlock()
		timer.Reset(time.Until(next))
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-m.poke: // Reset above discards a stale expiry (Go ≥ 1.23 timers)
		}
	}
}

// takeOver gives every session the takeover grace, TTL + ElectionTimeout:
// counted from the time read after the sessions, or for a marked session
// from this replica's apply of its origin marker (never later than that
// time). It reads only the ids, TTLs and origins, a page at a time (the
// FSM applies between pages), outside the mutex that keepalives wait on;
// what the FSM applies meanwhile is replayed (a session opened meanwhile is
// in a later page or in the replay, or both; one that ended is removed by
// the replay) with the time of the replay — a session opened then gets replay time + TTL, after
// its OpenSession committed and so after its client sent it. It returns the
// number of sessions.
func (m *expiryManager) takeOver() int {
	m.mu.Lock()
	m.takeover = []takeoverEvt{}
	m.mu.Unlock()
	ttls := allSessionTTLs(m.h.fsm)
	now := time.Now()
	sessions := make(map[lockinfo.SessionID]*deadline, len(ttls))
	items := make([]*deadline, 0, len(ttls))
	origins := map[uint64]time.Time{} // at most the markers kept
	for _, s := range ttls {
		from := now
		if s.Origin != 0 {
			t, ok := origins[s.Origin]
			if !ok {
				t = m.h.times.marker(s.Origin, now)
				origins[s.Origin] = t
			}
			from = t
		}
		l := &deadline{id: s.ID, ttl: s.TTL, deadline: from.Add(s.TTL + m.grace), marked: s.Origin != 0}
		l.at = l.deadline
		sessions[s.ID] = l
		items = append(items, l)
	}
	var h timeHeap[*deadline]
	h.init(items)
	if f := m.takeoverRead.Load(); f != nil {
		(*f)()
	}

	m.mu.Lock()
	defer m.mu.Unlock()
	m.sessions, m.due = sessions, h
	replay := time.Now()
	for _, e := range m.takeover {
		m.sessionEventLocked(e, replay)
	}
	m.takeover = nil
	m.delays.reset()
	m.leading = true
	m.traceInstalledLocked()
	return len(m.sessions)
}

// sessionEventLocked applies a session's opening or end to the deadlines.
func (m *expiryManager) sessionEventLocked(e takeoverEvt, now time.Time) (poke bool) {
	switch e.kind {
	case fsmwire.EventSessionOpened:
		if m.sessions[e.id] != nil {
			return false
		}
		l := &deadline{id: e.id, ttl: e.ttl, deadline: now.Add(e.ttl)}
		l.at = l.deadline
		m.sessions[e.id] = l
		m.due.add(l)
		if s := m.h.traceSink(); s != nil && m.takeover == nil {
			s.Record(leasetrace.Event{At: now.UnixNano(), Kind: leasetrace.DeadlineSet, Session: uint64(e.id), Deadline: l.deadline.UnixNano()})
		}
		return l.at.Before(m.wakeAt)
	case fsmwire.EventSessionClosed, fsmwire.EventSessionExpired:
		if l := m.sessions[e.id]; l != nil {
			delete(m.sessions, e.id)
			m.due.remove(l.slot)
		}
	case fsmwire.EventRestored: // replayed after a takeover (restored)
		m.resyncLocked(now, e.ttls)
		return true
	}
	return false
}

// expire proposes ExpireSessions for the sessions past their deadline (and
// again for those whose proposal failed a while ago). It returns when it
// next needs to run.
func (m *expiryManager) expire(ctx context.Context) time.Time {
	now := time.Now()
	retry := m.h.retry
	next := now.Add(time.Minute)
	var due []lockinfo.SessionID
	m.mu.Lock()
	for {
		l, ok := m.due.first()
		if !ok || l.at.After(now) {
			break
		}
		l.expiring, l.proposed, l.at = true, now, now.Add(retry)
		m.due.fix(l.slot)
		due = append(due, l.id)
	}
	if l, ok := m.due.first(); ok {
		next = minTime(next, l.at)
	}
	m.mu.Unlock()
	if len(due) == 0 {
		return next
	}
	slices.Sort(due)
	for len(due) > 0 {
		chunk := due[:min(len(due), fsmwire.MaxExpireSessions)]
		due = due[len(chunk):]
		traceSessions(m.h.traceSink(), leasetrace.ProposeExpire, chunk, nil)
		out := m.h.propose(ctx, fsm.ExpireSessions{Sessions: chunk})
		if out.err != nil {
			m.h.log.Warn("proposing session expiry failed; will retry", "sessions", len(chunk), "err", out.err)
			continue
		}
		m.h.expired(out.result().Count)
		m.h.log.Info("sessions expired", "count", out.result().Count, "index", out.index)
	}
	return next
}

// observe updates deadlines and delay timers from applied events (FSM
// goroutine; O(log n) per event, never blocks for long). The TTLs of the
// sessions opened are read from the FSM before the mutex is taken: a
// keepalive, which waits on the mutex, never waits on the FSM's lock.
func (m *expiryManager) observe(events []fsm.Event) {
	var buf [8]time.Duration
	opened := buf[:0] // the TTL of each EventSessionOpened, in order; 0: gone
	for _, e := range events {
		if e.Kind == fsmwire.EventSessionOpened {
			s, _ := m.h.fsm.Session(e.Session)
			opened = append(opened, s.TTL)
		}
	}
	poke := false
	m.mu.Lock()
	if m.leading || m.takeover != nil {
		now := time.Now()
		for _, e := range events {
			switch e.Kind {
			case fsmwire.EventSessionOpened, fsmwire.EventSessionClosed, fsmwire.EventSessionExpired:
				te := takeoverEvt{kind: e.Kind, id: e.Session}
				if e.Kind == fsmwire.EventSessionOpened {
					te.ttl, opened = opened[0], opened[1:]
					if te.ttl == 0 {
						continue
					}
				}
				if m.takeover != nil {
					m.takeover = append(m.takeover, te)
				} else if m.sessionEventLocked(te, now) {
					poke = true
				}
			case fsmwire.EventReleased:
				if e.DelayFor > 0 && m.leading {
					poke = m.delays.arm(fsm.DelayRef{Lock: e.Lock, Token: e.DelayToken}, now.Add(e.DelayFor), m.wakeAt) || poke
				}
				poke = poke || (e.DelayUntil != 0 && e.DelayFor == 0) // version 1: the tick decides
			case fsmwire.EventClusterChanged:
				m.delays.armedAll = false // a new version may time the delays anew
				poke = true
			}
		}
	}
	m.mu.Unlock()
	if poke {
		m.wake()
	}
}

// restored re-reads every session after a restore (a follower installing
// the leader's snapshot, a restore command, or the leader a user
// snapshot). During a takeover it is replayed with the events applied
// meanwhile. It runs on the FSM goroutine: the sessions it reads, a page
// at a time before it takes the mutex, are those the restore left. (A
// takeover that begins after the first look reads them itself.)
func (m *expiryManager) restored() {
	m.mu.Lock()
	active := m.leading || m.takeover != nil
	m.mu.Unlock()
	if !active {
		m.wake()
		return
	}
	ttls := allSessionTTLs(m.h.fsm)
	m.mu.Lock()
	if m.takeover != nil {
		m.takeover = append(m.takeover, takeoverEvt{kind: fsmwire.EventRestored, ttls: ttls})
	} else if m.leading {
		m.resyncLocked(time.Now(), ttls)
	}
	m.mu.Unlock()
	m.wake()
}

// resyncLocked gives the sessions of ttls (what the state machine has)
// that the deadlines lack a deadline of now + TTL + the takeover grace,
// and drops the deadlines of sessions it no longer has.
func (m *expiryManager) resyncLocked(now time.Time, ttls []fsm.SessionTTL) {
	present := make(map[lockinfo.SessionID]bool, len(ttls))
	for _, s := range ttls {
		present[s.ID] = true
		if m.sessions[s.ID] == nil {
			l := &deadline{id: s.ID, ttl: s.TTL, deadline: now.Add(s.TTL + m.grace), marked: s.Origin != 0}
			l.at = l.deadline
			m.sessions[s.ID] = l
			m.due.add(l)
		}
	}
	// A restore (Operator.Restore): the sessions it replaced are gone, and
	// their keepalives must fail.
	for id, l := range m.sessions {
		if !present[id] {
			delete(m.sessions, id)
			m.due.remove(l.slot)
		}
	}
	m.delays.armedAll = false
}

// isLeading reports whether this node leads and has finished its takeover.
func (m *expiryManager) isLeading() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.leading
}

// allSessionTTLs reads the id and TTL of every session, a page at a time.
func allSessionTTLs(f *fsm.FSM) []fsm.SessionTTL {
	var out []fsm.SessionTTL
	for after, more := lockinfo.SessionID(0), true; more; {
		var page []fsm.SessionTTL
		page, more = f.SessionTTLs(after, 0)
		out = append(out, page...)
		if more {
			after = page[len(page)-1].ID
		}
	}
	return out
}
