package gossip

import (
	"context"
	"encoding/json"
	"log/slog"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/raftlock/raftlock/internal/membership"
)

// memberInfo is what this node knows of one member (gossip events).
type memberInfo struct {
	meta   Meta
	gossip string
	state  State // alive, dead or left; suspect is derived from heard
	since  time.Time
	heard  time.Time // last join, update or direct probe answer
}

// Layer is a node's gossip layer (hashicorp/memberlist): the member table
// fed by its events (NotifyJoin and the other delegate methods), the join
// loop, the published metadata (Meta) and the views the formation and the
// leader's reconciler read (View, FormationCandidates).
//
// memberlist calls the delegate methods with its own lock held: they only
// touch m.mu and never call memberlist; nothing calls memberlist while
// holding m.mu.
type Layer struct {
	cfg    Config
	h      Host
	log    *slog.Logger
	timing Timing
	ml     *memberlist.Memberlist
	addr   string // advertised gossip address
	seeds  []string

	ctx       context.Context // the join and run loops
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	poke      chan struct{} // run loop
	pubPoke   chan struct{} // publisher: the metadata changed
	firstJoin chan struct{} // closed after the first join attempt
	life      sync.Mutex    // memberlist Leave and Shutdown (Leave after Shutdown panics)

	mu        sync.Mutex
	meta      Meta // published
	metaDirty bool
	members   map[string]*memberInfo
	fatal     error  // another live member uses our id (we have no Raft state)
	joinErr   string // last join failure, "" after a success
	joined    bool
	down      bool // memberlist shut down
	reported  map[string]bool
	known     knownPeers // gossip addresses of members seen alive
}

func (m *Layer) fatalErr() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.fatal
}

func (m *Layer) wake() {
	select {
	case m.poke <- struct{}{}:
	default:
	}
}

// joinLoop joins through the seeds until one of them answered, and again
// whenever the node finds itself alone; and each round it tries to
// reconnect to one failed member (after a partition heals, memberlist alone
// would leave the two sides apart for good).
func (m *Layer) joinLoop() {
	defer m.wg.Done()
	first := true
	for {
		if m.fatalErr() == nil && !m.isDown() {
			m.mu.Lock()
			joined := m.joined
			m.mu.Unlock()
			if len(m.seeds) > 0 && (!joined || m.alone()) {
				m.join()
			}
			if !first {
				m.reconnect()
			}
		}
		if first {
			close(m.firstJoin)
			first = false
		}
		wait := time.NewTimer(m.timing.RetryJoinInterval)
		select {
		case <-wait.C:
		case <-m.ctx.Done():
			wait.Stop()
			return
		}
	}
}

// reconnect tries to join one failed member (not one that left), or one
// server of the Raft configuration that gossip does not show at all,
// through its remembered address.
func (m *Layer) reconnect() {
	var addrs []string
	m.mu.Lock()
	for id, mi := range m.members {
		if id != m.cfg.ID && mi.state == Dead && mi.gossip != "" {
			addrs = append(addrs, mi.gossip)
		}
	}
	m.mu.Unlock()
	addrs = append(addrs, m.lostServers()...)
	if len(addrs) == 0 {
		return
	}
	addr := addrs[rand.N(len(addrs))]
	if n, err := m.ml.Join([]string{addr}); n > 0 {
		m.log.Info("reconnected to a failed member", "gossip_addr", addr)
	} else {
		m.log.Debug("reconnecting to a failed member", "gossip_addr", addr, "err", err)
	}
}

// join tries every seed once. A round in which none answered is recorded
// for Status (seedsUnreachable).
func (m *Layer) join() {
	contacted := 0
	var failed []string
	for _, seed := range m.seeds {
		k, err := m.ml.Join([]string{seed})
		if k > 0 {
			contacted += k
			continue
		}
		failed = append(failed, seed+" ("+joinFailure(seed, err)+")")
	}
	if contacted > 0 {
		m.mu.Lock()
		again := m.joined
		m.joined, m.joinErr = true, ""
		m.mu.Unlock()
		m.h.Joined(true)
		if !again {
			m.log.Info("joined the gossip cluster", "seeds_contacted", contacted)
		} else {
			m.log.Info("rejoined the gossip cluster", "seeds_contacted", contacted)
		}
		return
	}
	msg := seedsUnreachable + ": tried " + strings.Join(failed, "; ")
	m.mu.Lock()
	repeated := m.joinErr == msg
	m.joinErr = msg
	m.mu.Unlock()
	m.h.Joined(false)
	if repeated {
		m.log.Debug("gossip join failed; will retry", "seeds", m.seeds, "err", msg)
	} else {
		m.log.Warn("gossip join failed; will retry", "seeds", m.seeds, "retry_in", m.timing.RetryJoinInterval, "err", msg)
	}
}

// seedsUnreachable begins the join error of a round in which no seed
// answered.
const seedsUnreachable = "no seed reachable"

// joinFailure is why memberlist could not join through seed, on one line:
// its per-address errors (a host name may resolve to several), without the
// "failed to join <seed>: " that repeats the seed.
func joinFailure(seed string, err error) string {
	if err == nil {
		return "no member answered"
	}
	errs := []error{err}
	if w, ok := err.(interface{ WrappedErrors() []error }); ok && len(w.WrappedErrors()) > 0 {
		errs = w.WrappedErrors() // memberlist's *multierror.Error
	}
	var out []string
	for _, e := range errs {
		out = append(out, strings.TrimPrefix(strings.Join(strings.Fields(e.Error()), " "), "failed to join "+seed+": "))
	}
	return strings.Join(out, ", ")
}

// alone reports whether no other member is alive.
func (m *Layer) alone() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for id, mi := range m.members {
		if id != m.cfg.ID && mi.state == Alive {
			return false
		}
	}
	return true
}

func (m *Layer) isDown() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.down
}

// run keeps the published metadata current, drives the bootstrap agreement,
// forgets long-gone members, and stops gossip on a fatal id conflict.
func (m *Layer) run() {
	defer m.wg.Done()
	tick := time.NewTicker(m.timing.ProbeInterval)
	defer tick.Stop()
	for {
		if m.fatalErr() != nil {
			m.log.Error("another live member uses this node's id: gossip stopped; this node will not join the cluster", "err", m.fatalErr())
			m.shutdownGossip()
			return
		}
		m.publish()
		m.prune()
		m.known.save(time.Now())
		select {
		case <-m.ctx.Done():
			return
		case <-m.poke:
		case <-tick.C:
		}
	}
}

// publish has the metadata re-advertised if it changed.
func (m *Layer) publish() {
	state, cid := m.h.HasRaftState(), m.h.ClusterID()
	m.mu.Lock()
	if m.meta.State != state || m.meta.Cluster != cid {
		m.meta.State, m.meta.Cluster, m.metaDirty = state, cid, true
	}
	dirty := m.metaDirty
	m.metaDirty = false
	m.mu.Unlock()
	if dirty {
		select {
		case m.pubPoke <- struct{}{}:
		default:
		}
	}
}

// publishLoop re-advertises the metadata (memberlist reads the latest from
// NodeMeta), so that the run loop never waits for gossip.
func (m *Layer) publishLoop() {
	defer m.wg.Done()
	for {
		select {
		case <-m.ctx.Done():
			return
		case <-m.pubPoke:
		}
		if m.isDown() {
			continue
		}
		// The update is queued for gossip either way; the wait only confirms
		// it went out, so a timeout is harmless.
		if err := m.ml.UpdateNode(m.updateTimeout()); err != nil {
			m.log.Debug("metadata update not yet confirmed", "err", err)
		}
	}
}

func (m *Layer) updateTimeout() time.Duration {
	return 5*m.timing.GossipInterval + m.timing.ProbeInterval
}

// prune forgets members that failed or left long ago and are not in the
// Raft configuration.
func (m *Layer) prune() {
	conf, ok := m.h.LatestConfig()
	if !ok {
		return
	}
	inConf := map[string]bool{}
	for _, s := range conf.Servers {
		inConf[membership.NodeOf(s.ID)] = true
	}
	forget := m.cfg.ReapTimeout + m.timing.PushPullInterval
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	for id, mi := range m.members {
		if mi.state != Alive && !inConf[id] && now.Sub(mi.since) > forget {
			delete(m.members, id)
		}
	}
}

// conflict logs a refused member once per key and counts it.
func (m *Layer) conflict(reason, key, msg string, args ...any) {
	m.mu.Lock()
	k := reason + "|" + key
	seen := m.reported[k]
	m.reported[k] = true
	m.mu.Unlock()
	if seen {
		return
	}
	m.h.Conflict(reason)
	m.log.Error(msg, append([]any{"reason", reason}, args...)...)
}

// Gossip user messages (memberlist SendReliable), bounded by maxUserMsg.
const (
	userMsgRefusal byte = 'R' // a Refusal, JSON
	maxUserMsg          = 4 << 10
)

// Refusal is the notice a leader sends to a node it refused (node's
// opRefused; through gossip, Notify).
type Refusal struct {
	Reason string `json:"reason"`
	Detail string `json:"detail"`
	By     string `json:"by"`
}

// Notify sends a refusal notice to the member named id through gossip; it
// reports whether the member is alive in the member table (the send itself
// is best effort).
//
// The address comes from the member table, which the event delegate fills
// while memberlist holds its lock: the *memberlist.Node values that
// Members() returns are memberlist's own, which it rewrites when a member's
// address changes, so reading one later is a data race.
func (m *Layer) Notify(id string, r Refusal) bool {
	if m.isDown() {
		return false
	}
	b, err := json.Marshal(r)
	if err != nil || len(b)+1 > maxUserMsg {
		return false
	}
	m.mu.Lock()
	mi := m.members[id]
	var addr string
	if mi != nil && mi.state == Alive {
		addr = mi.gossip
	}
	m.mu.Unlock()
	to, ok := memberlistNode(id, addr)
	if !ok {
		return false
	}
	if err := m.ml.SendReliable(to, append([]byte{userMsgRefusal}, b...)); err != nil {
		m.log.Debug("refusal notice not sent", "member", id, "err", err)
	}
	return true
}

// memberlistNode is the memberlist.Node of a member named id at addr (an
// IP and port, as memberlist.Node.Address writes it); false if addr is not
// one.
func memberlistNode(id, addr string) (*memberlist.Node, bool) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, false
	}
	ip := net.ParseIP(host)
	p, err := strconv.ParseUint(port, 10, 16)
	if ip == nil || err != nil {
		return nil, false
	}
	return &memberlist.Node{Name: id, Addr: ip, Port: uint16(p)}, true
}
