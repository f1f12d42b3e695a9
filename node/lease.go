package node

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/raftlock/raftlock/fsm"
)

// leaseManager runs on the leader. It keeps every session's deadline in
// memory (keepalives are not written to the log), proposes ExpireSessions for
// sessions past their deadline and Tick when a lock-delay ends. Followers
// keep no deadlines: a new leader first commits a barrier, then gives every
// session now + TTL + ElectionTimeout (the takeover grace), so that a
// keepalive acknowledged by the old leader is never cut short.
type leaseManager struct {
	n     *Node
	poke  chan struct{}
	grace time.Duration

	mu      sync.Mutex
	leading bool // deadlines are initialised for this leadership term
	leases  map[fsm.SessionID]*lease
}

type lease struct {
	ttl      time.Duration
	deadline time.Time
	expiring bool      // past its deadline; ExpireSessions proposed
	proposed time.Time // when ExpireSessions was (last) proposed
}

func newLeaseManager(n *Node) *leaseManager {
	return &leaseManager{n: n, poke: make(chan struct{}, 1), grace: n.cfg.Timing.ElectionTimeout}
}

func (m *leaseManager) wake() {
	select {
	case m.poke <- struct{}{}:
	default:
	}
}

// lead runs the leader's duties until ctx ends (leadership lost or node closed).
func (m *leaseManager) lead(ctx context.Context) {
	defer func() {
		m.mu.Lock()
		m.leading, m.leases = false, nil
		m.mu.Unlock()
	}()
	// The takeover barrier: commit an entry of this term through the FSM
	// (a Tick, which also ends overdue lock-delays). Once it is applied, the
	// FSM reflects every entry of earlier terms, and — unlike raft's own
	// Barrier, which the FSM never sees — the commit index points at an
	// entry the FSM applies, so read-index waits can complete.
	for {
		out := m.n.proposeAsLeader(ctx, fsm.Tick{})
		if out.err == nil {
			break
		}
		m.n.log.Debug("takeover barrier failed", "err", out.err)
		if sleepCtx(ctx, m.n.cfg.Timing.HeartbeatTimeout) != nil {
			return
		}
	}
	now := time.Now()
	m.mu.Lock()
	m.leases = make(map[fsm.SessionID]*lease)
	for _, s := range m.n.fsm.Sessions() {
		m.leases[s.ID] = &lease{ttl: s.TTL, deadline: now.Add(s.TTL + m.grace)}
	}
	m.leading = true
	n := len(m.leases)
	m.mu.Unlock()
	m.n.log.Info("leading", "sessions", n, "grace", m.grace)

	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		next := m.expire(ctx)
		if t, ok := m.tick(ctx); ok && t.Before(next) {
			next = t
		}
		timer.Reset(time.Until(next))
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-m.poke: // Reset above discards a stale expiry (Go ≥ 1.23 timers)
		}
	}
}

// expire proposes ExpireSessions for the sessions past their deadline (and
// again for those whose proposal failed a while ago). It returns when it
// next needs to run.
func (m *leaseManager) expire(ctx context.Context) time.Time {
	now := time.Now()
	retry := m.n.cfg.ForwardTimeout
	next := now.Add(time.Minute)
	var due []fsm.SessionID
	m.mu.Lock()
	for id, l := range m.leases {
		switch {
		case l.expiring && now.Sub(l.proposed) >= retry:
			l.proposed = now
			due = append(due, id)
		case l.expiring:
			next = minTime(next, l.proposed.Add(retry))
		case !now.Before(l.deadline): // at or past the deadline
			l.expiring, l.proposed = true, now
			due = append(due, id)
		default:
			next = minTime(next, l.deadline)
		}
	}
	m.mu.Unlock()
	if len(due) == 0 {
		return next
	}
	slices.Sort(due)
	for len(due) > 0 {
		chunk := due[:min(len(due), fsm.MaxExpireSessions)]
		due = due[len(chunk):]
		out := m.n.proposeAsLeader(ctx, fsm.ExpireSessions{Sessions: chunk})
		if out.err != nil {
			m.n.log.Warn("proposing session expiry failed; will retry", "sessions", len(chunk), "err", out.err)
			next = minTime(next, now.Add(retry))
			continue
		}
		m.n.metrics.expiryProposals.Add(float64(out.res.Count))
		m.n.log.Info("sessions expired", "count", out.res.Count, "index", out.index)
	}
	return next
}

// tick proposes a Tick if a lock-delay is over, and returns when the next one
// ends (false if none).
func (m *leaseManager) tick(ctx context.Context) (time.Time, bool) {
	end, ok := m.n.fsm.NextDelayEnd()
	if !ok {
		return time.Time{}, false
	}
	now := time.Now()
	clock := max(m.n.wallNow().UnixNano(), m.n.fsm.Stats().Clock) // the FSM's time never goes back
	if wait := time.Duration(end - clock); wait > 0 {
		return now.Add(wait), true
	}
	if out := m.n.proposeAsLeader(ctx, fsm.Tick{}); out.err != nil {
		m.n.log.Warn("proposing lock-delay tick failed; will retry", "err", out.err)
		return now.Add(m.n.cfg.Timing.HeartbeatTimeout), true
	}
	return m.tick(ctx)
}

// observe updates deadlines from applied events (FSM goroutine; never blocks
// for long).
func (m *leaseManager) observe(events []fsm.Event) {
	poke := false
	m.mu.Lock()
	if m.leading {
		now := time.Now()
		for _, e := range events {
			switch e.Kind {
			case fsm.EventSessionOpened:
				if s, ok := m.n.fsm.Session(e.Session); ok {
					m.leases[e.Session] = &lease{ttl: s.TTL, deadline: now.Add(s.TTL)}
					poke = true
				}
			case fsm.EventSessionClosed, fsm.EventSessionExpired:
				delete(m.leases, e.Session)
			case fsm.EventReleased:
				poke = poke || e.DelayUntil != 0
			}
		}
	}
	m.mu.Unlock()
	if poke {
		m.wake()
	}
}

// restored re-reads every session after a snapshot restore (only a follower
// restores, but keep the leader's view right if it ever happens).
func (m *leaseManager) restored() {
	m.mu.Lock()
	if m.leading {
		now := time.Now()
		old := m.leases
		m.leases = make(map[fsm.SessionID]*lease)
		for _, s := range m.n.fsm.Sessions() {
			if l := old[s.ID]; l != nil {
				m.leases[s.ID] = l
			} else {
				m.leases[s.ID] = &lease{ttl: s.TTL, deadline: now.Add(s.TTL + m.grace)}
			}
		}
	}
	m.mu.Unlock()
	m.wake()
}

// keepAlive renews a session on the leader: refused if the session's deadline
// had passed when the keepalive was received (even if its expiry is not yet
// committed), confirmed with a (batched) VerifyLeader before the deadline is
// moved to received + TTL.
func (m *leaseManager) keepAlive(ctx context.Context, id fsm.SessionID) error {
	received := time.Now()
	if err := m.check(id, received); err != nil {
		return err
	}
	if err := m.n.verifier.confirm(ctx); err != nil {
		return leadershipErr(err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.leading {
		return errNotLeader
	}
	l := m.leases[id]
	if l == nil || l.expiring {
		return ErrSessionExpired
	}
	if d := received.Add(l.ttl); d.After(l.deadline) {
		l.deadline = d
	}
	return nil
}

func (m *leaseManager) check(id fsm.SessionID, received time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.leading {
		return errNotLeader
	}
	l := m.leases[id]
	if l == nil || l.expiring || !received.Before(l.deadline) {
		return ErrSessionExpired
	}
	return nil
}

// isLeading reports whether this node leads and has finished its takeover.
func (m *leaseManager) isLeading() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.leading
}

// deadline returns the session's deadline on this leader (tests, status).
func (m *leaseManager) deadline(id fsm.SessionID) (time.Time, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if l := m.leases[id]; l != nil {
		return l.deadline, true
	}
	return time.Time{}, false
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
