package fsm

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/lockinfo"
)

// model is a naive reference implementation of the lock semantics: plain
// maps and slices, sessions ended by scanning every lock, quotas counted by
// scanning, no copy-on-write, no indexes. The rapid test checks the real
// FSM against it step by step.
type model struct {
	clock     int64  // as state.clock
	now       int64  // the current entry's time
	index     uint64 // the current entry's index
	version   uint64
	clusterID string
	limits    Limits
	nextSess  lockinfo.SessionID
	token     lockinfo.Token
	sessions  map[lockinfo.SessionID]*msession
	locks     map[string]*mlock
	markers   []uint64 // every takeover marker (version 4), ascending: none pruned
}

type msession struct {
	renewed  uint64 // index of the entry that last renewed it (open, Renewed)
	delay    time.Duration
	floor    uint64
	results  map[uint64]Result
	desc     string
	node     string
	reserved bool
}

type mowner struct {
	session lockinfo.SessionID
	owner   lockinfo.OwnerID
	token   lockinfo.Token
	shared  bool
	permits int
	value   string
}

type mlock struct {
	holder     *mowner
	shared     []mowner // read grants or semaphore grants, in grant order
	limit      int      // > 0: a semaphore
	queue      []mowner
	delayed    bool
	until      int64
	delayFor   int64
	delayToken lockinfo.Token
	delayNode  string
}

func newModel() *model {
	return &model{version: 1, sessions: map[lockinfo.SessionID]*msession{}, locks: map[string]*mlock{}}
}

// entry sets the index and the time the commands of an entry stamped at
// see.
func (m *model) entry(index uint64, at int64) {
	m.index = index
	if m.version >= 2 {
		m.clock = at
	} else {
		m.clock = max(m.clock, at)
	}
	m.now = m.clock
}

func (m *model) lock(name string) *mlock {
	l := m.locks[name]
	if l == nil {
		l = &mlock{}
		m.locks[name] = l
	}
	return l
}

func (m *model) gc() {
	for name, l := range m.locks {
		if l.holder == nil && len(l.shared) == 0 && len(l.queue) == 0 && !l.delayed {
			delete(m.locks, name)
		}
	}
}

// promote grants the head of the queue while the lock admits it.
func (m *model) promote(l *mlock) {
	for len(l.queue) > 0 {
		w := l.queue[0]
		if _, live := m.sessions[w.session]; !live {
			l.queue = l.queue[1:]
			continue
		}
		if !l.admits(w) {
			return
		}
		l.queue = l.queue[1:]
		m.grant(l, w)
	}
}

// acquisitions counts what a session holds or waits for, by scanning.
func (m *model) acquisitions(s lockinfo.SessionID) int {
	n := 0
	for _, l := range m.locks {
		if l.holder != nil && l.holder.session == s {
			n++
		}
		for _, w := range l.shared {
			if w.session == s {
				n++
			}
		}
		for _, w := range l.queue {
			if w.session == s {
				n++
			}
		}
	}
	return n
}

func (m *model) apply(c Command) Result {
	defer m.gc()
	if err := c.validate(); err != nil {
		return Result{Status: fsmwire.StatusInvalid}
	}
	if need := NeedsVersion(c); need >= 3 && need > m.version {
		return Result{Status: fsmwire.StatusInvalid}
	}
	r, ok := requestOf(c)
	if !ok {
		return m.exec(c)
	}
	s := m.sessions[r.session]
	switch {
	case s == nil:
		return Result{Status: fsmwire.StatusNoSession}
	case r.seq < s.floor:
		return Result{Status: fsmwire.StatusStale, Session: r.session}
	}
	if res, ok := s.results[r.seq]; ok {
		return res
	}
	floor := max(s.floor, r.ackBelow)
	if r.seq-floor >= m.limits.window() {
		return Result{Status: fsmwire.StatusQuota, Quota: fsmwire.QuotaRequests}
	}
	res := m.exec(c)
	if s := m.sessions[r.session]; s != nil {
		s.floor = floor
		for seq := range s.results {
			if seq < floor {
				delete(s.results, seq)
			}
		}
		s.results[r.seq] = res
	}
	return res
}

func (m *model) exec(c Command) Result {
	switch c := c.(type) {
	case OpenSession:
		return m.openSession(c)
	case CloseSession:
		if _, ok := m.sessions[c.Session]; !ok {
			return Result{Status: fsmwire.StatusNoSession}
		}
		m.end(c.Session, c.Lapsed) // a lapsed close is an expiry
		return Result{Status: fsmwire.StatusOK}
	case ExpireSessions:
		n := 0
		for _, s := range c.Sessions {
			if _, ok := m.sessions[s]; ok {
				m.end(s, true)
				n++
			}
		}
		return Result{Status: fsmwire.StatusOK, Count: n}
	case Acquire:
		return m.acquire(c)
	case Release:
		return m.release(c)
	case Takeover:
		if len(m.markers) == 0 || m.markers[len(m.markers)-1] != m.index {
			m.markers = append(m.markers, m.index)
		}
		return Result{Status: fsmwire.StatusOK}
	case Tick:
		if m.version >= 2 {
			return Result{Status: fsmwire.StatusOK}
		}
		n := 0
		for _, name := range slices.Sorted(maps.Keys(m.locks)) {
			if m.settle(m.locks[name]) {
				n++
			}
		}
		return Result{Status: fsmwire.StatusOK, Count: n}
	case Noop:
		return Result{Status: fsmwire.StatusOK}
	case EndDelay:
		n := 0
		for _, d := range c.Delays {
			if l := m.locks[d.Lock]; l != nil && l.delayed && l.delayToken == d.Token {
				*l = mlock{holder: l.holder, queue: l.queue}
				if l.holder == nil {
					m.promote(l)
				}
				n++
			}
		}
		return Result{Status: fsmwire.StatusOK, Count: n}
	case SetLimits:
		m.limits = c.Limits
		return Result{Status: fsmwire.StatusOK}
	case SetClusterVersion:
		switch {
		case c.Version < m.version:
			return Result{Status: fsmwire.StatusInvalid}
		case m.version < 2 && c.Version >= 2:
			for _, l := range m.locks {
				if l.delayed {
					l.delayFor, l.delayToken = min(max(l.until-m.clock, 0), int64(fsmwire.MaxLockDelay)), 0
				}
			}
		}
		m.version = c.Version
		return Result{Status: fsmwire.StatusOK}
	case InitCluster:
		if m.clusterID != "" && m.clusterID != c.ID {
			return Result{Status: fsmwire.StatusInvalid}
		}
		m.clusterID = c.ID
		return Result{Status: fsmwire.StatusOK}
	case SetValue:
		return m.setValue(c)
	case RaiseTokens:
		if f := m.now / 1000; f > 0 && lockinfo.Token(f) > m.token {
			m.token = lockinfo.Token(f)
		}
		return Result{Status: fsmwire.StatusOK, Token: m.token}
	case Revoke:
		return m.revoke(c)
	case Renewed:
		n := 0
		for _, id := range c.Sessions {
			if s := m.sessions[id]; s != nil {
				s.renewed = m.index
				n++
			}
		}
		return Result{Status: fsmwire.StatusOK, Count: n}
	}
	panic(fmt.Sprintf("model: unknown command %T", c))
}

// origin is the first of the newest maxMarkers markers after the session's
// last renewal (0: none), by scanning.
func (m *model) origin(s *msession) uint64 {
	kept := m.markers[max(len(m.markers)-maxMarkers, 0):]
	for _, mk := range kept {
		if mk > s.renewed {
			return mk
		}
	}
	return 0
}

// settle ends a version-1 delay that is over; it reports whether it did.
func (m *model) settle(l *mlock) bool {
	if !l.delayed || m.now < l.until {
		return false
	}
	l.delayed, l.until, l.delayNode = false, 0, ""
	if l.holder == nil {
		m.promote(l)
	}
	return true
}

func (m *model) acquire(c Acquire) Result {
	if _, ok := m.sessions[c.Session]; !ok {
		return Result{Status: fsmwire.StatusNoSession}
	}
	if lim := m.limits.MaxLockNameLen; lim > 0 && len(c.Lock) > lim {
		return Result{Status: fsmwire.StatusQuota, Quota: fsmwire.QuotaLockName}
	}
	if l := m.locks[c.Lock]; l != nil && l.limit != c.Limit {
		return Result{Status: fsmwire.StatusConflict, Session: c.Session, Count: l.limit}
	}
	l := m.lock(c.Lock)
	l.limit = c.Limit
	if m.version < 2 {
		m.settle(l)
	}
	exclusive := !c.Shared && c.Limit == 0
	if l.holder != nil && l.holder.owner == c.Owner {
		if l.holder.session != c.Session || !exclusive {
			return Result{Status: fsmwire.StatusInvalid}
		}
		return Result{Status: fsmwire.StatusGranted, Session: c.Session, Token: l.holder.token}
	}
	for _, g := range l.shared {
		if g.owner == c.Owner {
			if g.session != c.Session || exclusive || g.permits != c.Permits {
				return Result{Status: fsmwire.StatusInvalid}
			}
			return Result{Status: fsmwire.StatusGranted, Session: c.Session, Token: g.token}
		}
	}
	for i, w := range l.queue {
		if w.owner == c.Owner {
			if w.session != c.Session || w.shared != c.Shared || w.permits != c.Permits {
				return Result{Status: fsmwire.StatusInvalid}
			}
			return Result{Status: fsmwire.StatusQueued, Session: c.Session, Position: i + 1}
		}
	}
	req := mowner{session: c.Session, owner: c.Owner, shared: c.Shared, permits: c.Permits, value: c.Value}
	if len(l.queue) == 0 && l.admits(req) {
		if r := m.acquisitionQuota(c); r.Status != 0 {
			return r
		}
		return Result{Status: fsmwire.StatusGranted, Session: c.Session, Token: m.grant(l, req)}
	}
	if c.Wait {
		if r := m.waitQuota(l, c); r.Status != 0 {
			return r
		}
		if r := m.acquisitionQuota(c); r.Status != 0 {
			return r
		}
		l.queue = append(l.queue, req)
		return Result{Status: fsmwire.StatusQueued, Session: c.Session, Position: len(l.queue)}
	}
	r := Result{Status: fsmwire.StatusLocked, Session: c.Session, DelayUntil: l.until}
	if l.holder != nil {
		r.Holder = lockinfo.Holder{Session: l.holder.session, Owner: l.holder.owner, Token: l.holder.token}
	} else if l.limit > 0 {
		r.Count = l.limit - l.used()
	}
	return r
}

func (m *model) release(c Release) Result {
	if _, ok := m.sessions[c.Session]; c.Session != 0 && !ok {
		return Result{Status: fsmwire.StatusNoSession}
	}
	l := m.locks[c.Lock]
	if l == nil {
		return Result{Status: fsmwire.StatusNotHolder}
	}
	mine := func(s lockinfo.SessionID) bool { return c.Session == 0 || s == c.Session }
	defer m.promote(l)
	if l.holder != nil && l.holder.owner == c.Owner && mine(l.holder.session) {
		h := l.holder
		l.holder = nil
		if d := m.sessions[h.session].delay; c.Lapsed && d > 0 { // as on the session's expiry
			m.delay(l, d, h.token, m.sessions[h.session].node)
		}
		return Result{Status: fsmwire.StatusOK}
	}
	for i, g := range l.shared {
		if g.owner == c.Owner && mine(g.session) {
			l.shared = slices.Delete(l.shared, i, i+1)
			return Result{Status: fsmwire.StatusOK}
		}
	}
	for i, w := range l.queue {
		if w.owner == c.Owner && mine(w.session) {
			l.queue = slices.Delete(l.queue, i, i+1)
			return Result{Status: fsmwire.StatusOK}
		}
	}
	return Result{Status: fsmwire.StatusNotHolder}
}

// end removes a session by scanning every lock in name order.
func (m *model) end(s lockinfo.SessionID, expired bool) {
	delay, node := m.sessions[s].delay, m.sessions[s].node
	delete(m.sessions, s)
	for _, name := range slices.Sorted(maps.Keys(m.locks)) {
		l := m.locks[name]
		l.queue = slices.DeleteFunc(l.queue, func(w mowner) bool { return w.session == s })
		l.shared = slices.DeleteFunc(l.shared, func(w mowner) bool { return w.session == s })
		if l.holder == nil || l.holder.session != s {
			m.promote(l)
			continue
		}
		h := l.holder
		l.holder = nil
		if !expired || delay == 0 {
			m.promote(l)
			continue
		}
		m.delay(l, delay, h.token, node)
	}
}

// delay puts l, whose exclusive grant tok (of a session of node) just
// ended, into a lock-delay d.
func (m *model) delay(l *mlock, d time.Duration, tok lockinfo.Token, node string) {
	l.until = m.now + int64(d)
	if m.version >= 2 {
		l.delayed, l.delayFor, l.delayToken = true, int64(d), tok
	} else {
		l.delayed = l.until != 0
	}
	if l.delayed {
		l.delayNode = node
	}
}

// revoke ends the grant with the token: the exclusive holder (into its
// session's lock-delay), or from version 4 a shared grant (at once).
func (m *model) revoke(c Revoke) Result {
	l := m.locks[c.Lock]
	if l == nil {
		return Result{Status: fsmwire.StatusNotHolder}
	}
	if h := l.holder; h != nil && h.token == c.Token {
		l.holder = nil
		if d := m.sessions[h.session].delay; d > 0 {
			m.delay(l, d, h.token, m.sessions[h.session].node)
		} else {
			m.promote(l)
		}
		return Result{Status: fsmwire.StatusOK, Token: c.Token}
	}
	if m.version < 4 {
		return Result{Status: fsmwire.StatusNotHolder}
	}
	for i, g := range l.shared {
		if g.token == c.Token {
			l.shared = slices.Delete(l.shared, i, i+1)
			m.promote(l)
			return Result{Status: fsmwire.StatusOK, Token: c.Token}
		}
	}
	return Result{Status: fsmwire.StatusNotHolder}
}

// sameResult compares the fields the model computes.
func sameResult(got, want Result) bool {
	return got.Status == want.Status && got.Session == want.Session && got.Token == want.Token &&
		got.Position == want.Position && got.Count == want.Count && got.DelayUntil == want.DelayUntil &&
		got.Quota == want.Quota &&
		got.Holder.Session == want.Holder.Session && got.Holder.Owner == want.Holder.Owner && got.Holder.Token == want.Holder.Token
}

func readCloser(b []byte) *nopCloser { return &nopCloser{bytes.NewReader(b)} }

type nopCloser struct{ *bytes.Reader }

func (nopCloser) Close() error { return nil }
