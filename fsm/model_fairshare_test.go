package fsm

import (
	"slices"

	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/lockinfo"
)

// The model's fair shares (fairshare.go): every usage counted by scanning
// the sessions and locks, nothing kept.

// usageOf counts what node holds, and what the cluster holds.
func (m *model) usageOf(node string) (u, total usage) {
	add := func(n string, d usage) {
		if n == node {
			u = u.add(d)
		}
		total = total.add(d)
	}
	for _, s := range m.sessions {
		d := usage{sessions: 1, bytes: sessionCharge + int64(len(s.desc)+len(s.node))}
		if s.reserved {
			d.sessions, d.reserved = 0, 1
		}
		add(s.node, d)
	}
	for name, l := range m.locks {
		acq := func(o mowner) {
			add(m.sessions[o.session].node, usage{locks: 1, bytes: acquisitionBytes(name, o.value)})
		}
		if l.holder != nil {
			acq(*l.holder)
		}
		for _, g := range l.shared {
			acq(g)
		}
		for _, w := range l.queue {
			acq(w)
		}
		if l.delayed {
			add(l.delayNode, usage{locks: 1, bytes: delayBytes(name)})
		}
	}
	return u, total
}

// nodes lists every node that holds something.
func (m *model) nodes() []string {
	var out []string
	for _, s := range m.sessions {
		out = append(out, s.node)
	}
	for _, l := range m.locks {
		if l.delayed {
			out = append(out, l.delayNode)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func (m *model) openSession(c OpenSession) Result {
	lim := m.limits
	u, total := m.usageOf(c.Node)
	var r Result
	switch lim.fairShare(int64(lim.MaxSessions), int64(total.sessions), int64(u.sessions), 1) {
	case overBound:
		r = Result{Status: fsmwire.StatusQuota, Quota: fsmwire.QuotaSessions}
	case overShare:
		r = Result{Status: fsmwire.StatusQuota, Quota: fsmwire.QuotaNodeSessions}
	default:
		r = m.bytesQuota(u, total, sessionCharge+int64(len(c.Description)+len(c.Node)))
	}
	reserved := false
	if r.Status == fsmwire.StatusQuota {
		if !c.Reserved || u.reserved >= reservedSessions {
			return r
		}
		reserved = true
	}
	m.nextSess++
	m.sessions[m.nextSess] = &msession{renewed: m.index, delay: c.LockDelay, results: map[uint64]Result{}, desc: c.Description, node: c.Node, reserved: reserved}
	return Result{Status: fsmwire.StatusOK, Session: m.nextSess}
}

func (m *model) bytesQuota(u, total usage, n int64) Result {
	switch m.limits.fairShare(m.limits.MaxStateBytes, total.bytes, u.bytes, n) {
	case overBound:
		return Result{Status: fsmwire.StatusQuota, Quota: fsmwire.QuotaStateBytes}
	case overShare:
		return Result{Status: fsmwire.StatusQuota, Quota: fsmwire.QuotaNodeBytes}
	}
	return Result{}
}

// acquisitionQuota is the refusal of a new acquisition, or the zero Result.
func (m *model) acquisitionQuota(c Acquire) Result {
	if m.limits.MaxLocksPerSession > 0 && m.acquisitions(c.Session) >= m.limits.MaxLocksPerSession {
		return Result{Status: fsmwire.StatusQuota, Quota: fsmwire.QuotaSessionLocks}
	}
	u, total := m.usageOf(m.sessions[c.Session].node)
	switch m.limits.fairShare(int64(m.limits.MaxLocks), int64(total.locks), int64(u.locks), 1) {
	case overBound:
		return Result{Status: fsmwire.StatusQuota, Quota: fsmwire.QuotaLocks}
	case overShare:
		return Result{Status: fsmwire.StatusQuota, Quota: fsmwire.QuotaNodeLocks}
	}
	return m.bytesQuota(u, total, acquisitionBytes(c.Lock, c.Value))
}

// waitQuota is the refusal of a new waiter in l's queue, or the zero Result.
func (m *model) waitQuota(l *mlock, c Acquire) Result {
	lim := m.limits
	if lim.MaxWaitersPerLock > 0 && len(l.queue) >= lim.MaxWaitersPerLock {
		return Result{Status: fsmwire.StatusQuota, Quota: fsmwire.QuotaWaiters}
	}
	node := m.sessions[c.Session].node
	bySession, byNode := 0, 0
	for _, w := range l.queue {
		if w.session == c.Session {
			bySession++
		}
		if m.sessions[w.session].node == node {
			byNode++
		}
	}
	if lim.MaxSessionWaitersPerLock > 0 && bySession >= lim.MaxSessionWaitersPerLock {
		return Result{Status: fsmwire.StatusQuota, Quota: fsmwire.QuotaSessionWaiters}
	}
	if lim.fairShare(int64(lim.MaxWaitersPerLock), int64(len(l.queue)), int64(byNode), 1) == overShare {
		return Result{Status: fsmwire.StatusQuota, Quota: fsmwire.QuotaNodeWaiters}
	}
	return Result{}
}

// valueQuota is the refusal of a grant's value growing from old to value.
func (m *model) valueQuota(s lockinfo.SessionID, old, value string) Result {
	if len(value) <= len(old) {
		return Result{}
	}
	u, total := m.usageOf(m.sessions[s].node)
	return m.bytesQuota(u, total, int64(len(value)-len(old)))
}

// checkUsage compares every node's usage and the cluster's with the
// model's count.
func checkUsage(t tb, f *FSM, m *model) {
	t.Helper()
	var total usage
	for _, node := range m.nodes() {
		u, all := m.usageOf(node)
		total = all
		if got := f.st.nodes[node]; got != u {
			t.Fatalf("node %q uses %+v, model %+v", node, got, u)
		}
	}
	if len(f.st.nodes) != len(m.nodes()) || f.st.total != total {
		t.Fatalf("usage of %d nodes, total %+v; model %d nodes, %+v", len(f.st.nodes), f.st.total, len(m.nodes()), total)
	}
}
