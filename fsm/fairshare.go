package fsm

import (
	"fmt"

	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/lockinfo"
)

// Fair shares and the state's bounds (cluster version 4).
//
// # Who a session belongs to
//
// From cluster version 4 the leader stamps every OpenSession with the node
// the request came from (OpenSession.Node): itself for its own callers,
// and for a forwarded request the node id the forwarding connection's
// hello named — prefixed with "?" when, under TLS, the connection's
// certificate does not name that node, and "?" alone when the peer named
// none. Whatever a client puts in Node is replaced, so an application
// (or an HTTP client of the admin API) cannot charge its sessions to
// another node; a cluster member can only claim another member's id when
// its certificate names that id, or without TLS (members are trusted:
// they can propose any command). Sessions opened before version 4 belong
// to the node "". A session's waiters and locks count for its node, and a
// lock-delay for the node of the session whose expiry started it.
//
// # The rule
//
// Each cluster-wide bound B (Limits.MaxSessions, MaxLocks, MaxStateBytes,
// and MaxWaitersPerLock for each lock's queue) is shared by the nodes: with
// D = Limits.NodeShares, a node's share is S = B / (4D) (at least 1), and
// D × S — a quarter of B — is held back for the nodes within their share.
// A request that would add n to the usage U of the cluster (or of the
// queue), from a node that uses u, is
//
//   - refused when U + n > B (the bound: QuotaSessions, QuotaLocks,
//     QuotaStateBytes, QuotaWaiters);
//   - admitted when u + n <= S (within the node's share) or
//     U + n <= B − D × S (the cluster uses less than three quarters);
//   - refused otherwise (the node's share: QuotaNodeSessions,
//     QuotaNodeLocks, QuotaNodeBytes, QuotaNodeWaiters; ErrFairShare).
//
// So one node alone may use up to three quarters of a bound, and past that
// only the nodes within their share may add. Guarantee: while at most D
// nodes use a bound, a node within its share is never refused by it,
// whatever the others do. (The usage beyond the shares, Σ max(0, u − S),
// only grows while U <= B − D×S, so it stays at most B − D×S; the usage
// within the shares is at most D × S — so U + n <= B for a node within
// its share.) With more than D nodes, or after a limit was lowered below
// what is in use, the guarantee holds again once the usage drains below
// the bounds; nothing in use is ever taken away. The quarter held back is
// the price: nodes beyond their share (a lone node, or a few nodes evenly
// loaded) use at most about three quarters of a bound. Shares do not move when
// nodes join or leave: a new node gets its share at once, a node that
// left keeps its usage until its sessions end (they expire after their
// TTL when nobody keeps them alive).
//
// Besides, a session may have at most Limits.MaxSessionWaitersPerLock
// waiters in one lock's queue (QuotaSessionWaiters; ErrFairShare), and
// each node may hold reservedSessions sessions beyond its share and the
// cluster's MaxSessions, for OpenSession.Reserved (the admin server's own
// session): so the state holds at most MaxSessions + reservedSessions ×
// nodes sessions.
//
// # Accounted bytes
//
// Limits.MaxStateBytes counts, deterministically, what the state holds:
// every session sessionCharge plus its description and node, every grant
// and waiter acquisitionCharge plus its lock name and value, every
// lock-delay delayCharge plus its lock name. The fixed charges are the
// measured heap of the smallest such piece of state (BenchmarkHeapPer:
// a session of about 360 bytes, a held lock about 550 plus its name and
// value, a waiter in a long queue about 390), so that the accounted size
// bounds the heap from about above: a held lock with the longest name and
// value is 2,080 accounted bytes and about 2,070 of heap. The exactly-once
// results a session keeps are not charged; they are bounded by
// Limits.RequestWindow per session.

// Fixed charges of the accounted size (see above).
const (
	sessionCharge     = 352
	acquisitionCharge = 544
	delayCharge       = 544
)

// reservedSessions is how many sessions each node may open in its reserve
// (OpenSession.Reserved) once its share or the cluster's bound refuses a
// session.
const reservedSessions = 4

// usage is what a node (or the cluster) holds, for the fair shares.
type usage struct {
	sessions int   // live sessions outside the reserve
	reserved int   // live sessions in the node's reserve
	locks    int   // grants, waiters and lock-delays (MaxLocks)
	bytes    int64 // accounted bytes (MaxStateBytes)
}

func (u usage) add(d usage) usage {
	return usage{u.sessions + d.sessions, u.reserved + d.reserved, u.locks + d.locks, u.bytes + d.bytes}
}

func (u usage) neg() usage { return usage{-u.sessions, -u.reserved, -u.locks, -u.bytes} }

// use adds d to node's usage and to the cluster's.
func (st *state) use(node string, d usage) {
	u := st.nodes[node].add(d)
	if u == (usage{}) {
		delete(st.nodes, node)
	} else {
		if st.nodes == nil {
			st.nodes = make(map[string]usage)
		}
		st.nodes[node] = u
	}
	st.total = st.total.add(d)
}

func (s *session) charge() int64 {
	return sessionCharge + int64(len(s.description)+len(s.node))
}

func acquisitionBytes(name, value string) int64 {
	return acquisitionCharge + int64(len(name)+len(value))
}

func delayBytes(name string) int64 { return delayCharge + int64(len(name)) }

// sessionUsage is what a session itself adds to its node's usage.
func (s *session) usage() usage {
	u := usage{sessions: 1, bytes: s.charge()}
	if s.reserved {
		u.sessions, u.reserved = 0, 1
	}
	return u
}

// reserveDivisor: a quarter of each bound is held back for the shares
// (a share is bound / (reserveDivisor × NodeShares)).
const reserveDivisor = 4

// Verdicts of fairShare.
const (
	admitted = iota
	overBound
	overShare
)

// nodeShare is a node's share of bound.
func (l Limits) nodeShare(bound int64) int64 {
	return max(bound/(reserveDivisor*int64(l.NodeShares)), 1)
}

// fairShare applies the rule above: may a node that uses used of bound,
// of which the cluster uses total, add n? bound 0: no bound.
func (l Limits) fairShare(bound, total, used, n int64) int {
	switch {
	case bound <= 0:
		return admitted
	case total+n > bound:
		return overBound
	case l.NodeShares == 0 || used+n <= l.nodeShare(bound) || total+n <= bound-int64(l.NodeShares)*l.nodeShare(bound):
		return admitted
	}
	return overShare
}

// nodeName is how refusals name a node.
func nodeName(node string) string {
	switch node {
	case "":
		return "the sessions of before cluster version 4"
	case "?":
		return "an unidentified node"
	}
	return fmt.Sprintf("node %q", node)
}

// shareRefusal describes a refusal by a node's share of bound.
func (l Limits) shareRefusal(q fsmwire.Quota, what, node string, used, bound, total int64) Result {
	return quotaResult(q, "%s holds %d %s, its fair share of %d (1/(%d×%d) of the limit %d) while the cluster holds %d (three quarters or more)",
		nodeName(node), used, what, l.nodeShare(bound), reserveDivisor, l.NodeShares, bound, total)
}

// admitSession decides whether the session c opens, and whether it opens
// in its node's reserve.
func (a *applier) admitSession(c OpenSession) (reserved bool, r Result, refused bool) {
	st, l := a.st, a.st.limits
	u := st.nodes[c.Node]
	switch l.fairShare(int64(l.MaxSessions), int64(st.total.sessions), int64(u.sessions), 1) {
	case overBound:
		r, refused = quotaResult(fsmwire.QuotaSessions, "%d live sessions (limit %d)", st.total.sessions, l.MaxSessions), true
	case overShare:
		r, refused = l.shareRefusal(fsmwire.QuotaNodeSessions, "sessions", c.Node, int64(u.sessions), int64(l.MaxSessions), int64(st.total.sessions)), true
	default:
		n := sessionCharge + int64(len(c.Description)+len(c.Node))
		r, refused = a.bytesQuota(c.Node, u, n)
	}
	if refused && c.Reserved && u.reserved < reservedSessions {
		return true, Result{}, false
	}
	return false, r, refused
}

// bytesQuota refuses n more accounted bytes of node (which uses u).
func (a *applier) bytesQuota(node string, u usage, n int64) (Result, bool) {
	st, l := a.st, a.st.limits
	switch l.fairShare(l.MaxStateBytes, st.total.bytes, u.bytes, n) {
	case overBound:
		return quotaResult(fsmwire.QuotaStateBytes, "the state holds %d accounted bytes, %d more would pass the limit %d", st.total.bytes, n, l.MaxStateBytes), true
	case overShare:
		return l.shareRefusal(fsmwire.QuotaNodeBytes, "accounted bytes", node, u.bytes, l.MaxStateBytes, st.total.bytes), true
	}
	return Result{}, false
}

// acquisitionQuota refuses a new acquisition (a grant or a wait) of
// session s on lock name with value: the session's locks, then the
// cluster's locks and bytes and the node's shares of them.
func (a *applier) acquisitionQuota(s *session, name, value string) (Result, bool) {
	if r, refused := a.sessionQuota(s); refused {
		return r, true
	}
	st, l := a.st, a.st.limits
	u := st.nodes[s.node]
	switch l.fairShare(int64(l.MaxLocks), int64(st.total.locks), int64(u.locks), 1) {
	case overBound:
		return quotaResult(fsmwire.QuotaLocks, "the cluster holds %d locks, waits and lock-delays (limit %d)", st.total.locks, l.MaxLocks), true
	case overShare:
		return l.shareRefusal(fsmwire.QuotaNodeLocks, "locks, waits and lock-delays", s.node, int64(u.locks), int64(l.MaxLocks), int64(st.total.locks)), true
	}
	return a.bytesQuota(s.node, u, acquisitionBytes(name, value))
}

// waitQuota refuses a new waiter of session s in the queue of lock name:
// the queue's bound, the session's share of it, then its node's.
func (a *applier) waitQuota(l *lock, s *session, name string) (Result, bool) {
	lim := a.st.limits
	n := l.waiters.len()
	if lim.MaxWaitersPerLock > 0 && n >= lim.MaxWaitersPerLock {
		return quotaResult(fsmwire.QuotaWaiters, "%d waiters on lock %q (limit %d)", n, name, lim.MaxWaitersPerLock), true
	}
	bySession, byNode := l.waiters.countOf(s.id, s.node)
	if lim.MaxSessionWaitersPerLock > 0 && bySession >= lim.MaxSessionWaitersPerLock {
		return quotaResult(fsmwire.QuotaSessionWaiters, "session %d has %d waiters on lock %q, its share of the queue (limit %d)",
			s.id, bySession, name, lim.MaxSessionWaitersPerLock), true
	}
	if lim.fairShare(int64(lim.MaxWaitersPerLock), int64(n), int64(byNode), 1) == overShare {
		return lim.shareRefusal(fsmwire.QuotaNodeWaiters, fmt.Sprintf("waiters on lock %q", name), s.node,
			int64(byNode), int64(lim.MaxWaitersPerLock), int64(n)), true
	}
	return Result{}, false
}

// valueQuota refuses the growth of a grant's value from old to value.
func (a *applier) valueQuota(s *session, old, value string) (Result, bool) {
	if len(value) <= len(old) {
		return Result{}, false
	}
	return a.bytesQuota(s.node, a.st.nodes[s.node], int64(len(value)-len(old)))
}

// recount sets every node's usage, the cluster's, each session's charge
// for its acquisitions and the nodes of the waiters from the sessions and
// locks (after a snapshot is read).
func (st *state) recount() {
	for _, l := range st.locks.all() {
		for i := l.waiters.head; i < len(l.waiters.items); i++ {
			w := &l.waiters.items[i]
			if s := st.sessions.get(w.session); s != nil && !w.owner.IsZero() {
				w.node = s.node
			}
		}
		if l.waiters.owners != nil {
			l.waiters.countNodes()
		}
	}
	var acqBytes map[lockinfo.SessionID]int64
	st.nodes, st.total, acqBytes = st.countUsage()
	for id, s := range st.sessions.all() {
		s.acqBytes = acqBytes[id]
	}
}

// countUsage counts every node's usage, the cluster's and each session's
// charge for its acquisitions from the sessions and locks; it changes
// nothing. O(state).
func (st *state) countUsage() (nodes map[string]usage, total usage, acqBytes map[lockinfo.SessionID]int64) {
	nodes, acqBytes = map[string]usage{}, map[lockinfo.SessionID]int64{}
	add := func(node string, d usage) {
		nodes[node] = nodes[node].add(d)
		total = total.add(d)
	}
	for name, l := range st.locks.all() {
		charge := func(id lockinfo.SessionID, value string) { acqBytes[id] += acquisitionBytes(name, value) }
		if l.held {
			charge(l.holder.session, l.holder.value)
		}
		for h := range l.shared.all() {
			charge(h.session, h.value)
		}
		for w := range l.waiters.all() {
			charge(w.session, w.value)
		}
		if l.delayed {
			add(l.delayNode, usage{locks: 1, bytes: delayBytes(name)})
		}
	}
	for id, s := range st.sessions.all() {
		add(s.node, s.usage().add(usage{locks: len(s.acqs), bytes: acqBytes[id]}))
	}
	if len(nodes) == 0 {
		nodes = nil
	}
	return nodes, total, acqBytes
}
