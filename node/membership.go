package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

// ErrDuplicateID: another live member of the gossip cluster already uses this
// node's ID. A node without Raft state that finds one refuses to take part:
// Start fails with it (or, when the duplicate is found later, gossip stops
// and Status.GossipErr says why).
var ErrDuplicateID = errors.New("node: duplicate node id")

// MemberState is the state of a member as this node's gossip layer sees it.
type MemberState string

// Member states.
const (
	// MemberAlive: the member answers.
	MemberAlive MemberState = "alive"
	// MemberSuspect: gossip still counts the member alive, but this node has
	// had no direct probe answer from it for several probe cycles. (This is
	// this node's own view: memberlist does not expose its suspicion.)
	MemberSuspect MemberState = "suspect"
	// MemberDead: the member failed (it stopped answering without leaving).
	MemberDead MemberState = "dead"
	// MemberLeft: the member left, or announced that it is leaving,
	// gracefully (Close).
	MemberLeft MemberState = "left"
	// MemberUnknown: in the Raft configuration, never seen by gossip here.
	MemberUnknown MemberState = "unknown"
)

// Member is one member of the cluster: a gossip member, a server of the Raft
// configuration, or both.
type Member struct {
	ID         string
	Addr       string // Raft/RPC address
	GossipAddr string // empty for MemberUnknown
	State      MemberState
	Since      time.Time // when this node saw State begin; zero for MemberUnknown
	Role       Role      // empty when not in the Raft configuration
	Leader     bool
}

// metaVersion is the version of the gossip metadata (memberMeta).
const metaVersion = 1

// memberMeta is what a node publishes about itself in gossip (JSON, at most
// memberlist.MetaMaxSize bytes). Fields after Leaving were added with
// identities; a node of the previous release publishes none of them (and
// ignores them), so both can be members during a rolling upgrade.
type memberMeta struct {
	V       int    `json:"v"`    // metadata version
	Wire    int    `json:"wire"` // forwarding protocol version (wire.go)
	ID      string `json:"id"`
	Addr    string `json:"addr"`              // Raft/RPC address
	Expect  int    `json:"expect,omitempty"`  // BootstrapExpect
	State   bool   `json:"state,omitempty"`   // has Raft state: part of a cluster
	Leaving bool   `json:"leaving,omitempty"` // decommissioning (Leave): remove me
	Inc     string `json:"inc,omitempty"`     // incarnation of its data dir
	RaftID  string `json:"rid,omitempty"`     // its Raft server id
	Cluster string `json:"cid,omitempty"`     // its cluster id ("" before it has one)
}

// decodeMeta parses and checks a member's metadata; on failure it also
// returns the conflict reason ("protocol" or "metadata").
func decodeMeta(name string, b []byte) (memberMeta, string, error) {
	var md memberMeta
	if err := json.Unmarshal(b, &md); err != nil {
		return md, "metadata", fmt.Errorf("undecodable metadata: %v", err)
	}
	switch {
	case md.V != metaVersion || md.Wire != int(wireVersion):
		return md, "protocol", fmt.Errorf("metadata version %d, wire version %d; this node speaks %d and %d", md.V, md.Wire, metaVersion, wireVersion)
	case md.ID != name:
		return md, "metadata", fmt.Errorf("metadata id %q differs from member name %q", md.ID, name)
	case md.Expect < 0:
		return md, "metadata", fmt.Errorf("negative BootstrapExpect %d", md.Expect)
	case md.Inc != "" && !isHexID(md.Inc):
		return md, "metadata", fmt.Errorf("bad incarnation %q", md.Inc)
	case md.Cluster != "" && !isHexID(md.Cluster):
		return md, "metadata", fmt.Errorf("bad cluster id %q", md.Cluster)
	}
	if md.RaftID != "" {
		id, inc := splitRaftID(md.RaftID)
		if id != md.ID || (inc != "" && inc != md.Inc) || (inc == "" && md.RaftID != md.ID) {
			return md, "metadata", fmt.Errorf("raft id %q does not name node %q with incarnation %q", md.RaftID, md.ID, md.Inc)
		}
	}
	if host, _, err := net.SplitHostPort(md.Addr); err != nil || host == "" {
		return md, "metadata", fmt.Errorf("bad Raft address %q", md.Addr)
	}
	return md, "", nil
}

// raftID returns the member's Raft id: as published, or (a node of the
// previous release) its node id.
func (md memberMeta) raftID() string {
	if md.RaftID != "" {
		return md.RaftID
	}
	return md.ID
}

// isHexID reports whether s is 16 lowercase hex digits (incarnations and
// cluster ids).
func isHexID(s string) bool {
	if len(s) != 16 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// memberInfo is what this node knows of one member (gossip events).
type memberInfo struct {
	meta   memberMeta
	gossip string
	state  MemberState // alive, dead or left; suspect is derived from heard
	since  time.Time
	heard  time.Time // last join, update or direct probe answer
}

// membership is a node's gossip layer: memberlist, the member table fed by
// its events, the join loop, the bootstrap agreement (BootstrapExpect), and
// the leader's reconciliation of the Raft configuration
// (membership_reconcile.go).
//
// memberlist calls the delegate methods below with its own lock held: they
// only touch m.mu and never call memberlist; nothing calls memberlist while
// holding m.mu.
type gossip struct {
	n      *Node
	log    *slog.Logger
	timing GossipTiming
	ml     *memberlist.Memberlist
	addr   string // advertised gossip address
	seeds  []string

	ctx       context.Context // the join and run loops
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	poke      chan struct{} // run loop
	leadPoke  chan struct{} // leader's reconciliation
	pubPoke   chan struct{} // publisher: the metadata changed
	firstJoin chan struct{} // closed after the first join attempt
	life      sync.Mutex    // memberlist Leave and Shutdown (Leave after Shutdown panics)

	mu        sync.Mutex
	meta      memberMeta // published
	metaDirty bool
	members   map[string]*memberInfo
	fatal     error  // another live member uses our id (we have no Raft state)
	joinErr   string // last join failure, "" after a success
	joined    bool
	down      bool // memberlist shut down
	reported  map[string]bool
}

// startMembership creates the gossip layer, makes the first join attempt
// (waited for at most 5 probe intervals, capped by TCPTimeout, and ctx; it
// goes on in the background if it takes longer) and starts its loops. Raft
// is running.
func (n *Node) startMembership(ctx context.Context) error {
	cfg := &n.cfg
	m := &gossip{
		n: n, log: n.log.With("component", "membership"), timing: cfg.gossipTiming(),
		poke: make(chan struct{}, 1), leadPoke: make(chan struct{}, 1), pubPoke: make(chan struct{}, 1), firstJoin: make(chan struct{}),
		members: make(map[string]*memberInfo), reported: make(map[string]bool),
	}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	id := n.ident()
	m.meta = memberMeta{V: metaVersion, Wire: int(wireVersion), ID: cfg.ID, Addr: n.trans.Addr(), Expect: cfg.BootstrapExpect, State: n.hasRaftState(),
		Inc: id.Incarnation, RaftID: id.RaftID, Cluster: id.ClusterID}
	worst := m.meta
	worst.Leaving, worst.State, worst.Cluster = true, true, strings.Repeat("f", 16)
	if b, _ := json.Marshal(worst); len(b) > memberlist.MetaMaxSize {
		m.cancel()
		return fmt.Errorf("%w: gossip metadata of %d bytes exceeds %d (shorten ID or address)", ErrInvalidConfig, len(b), memberlist.MetaMaxSize)
	}

	t := m.timing
	mc := memberlist.DefaultLANConfig()
	mc.Name = cfg.ID
	mc.ProbeInterval, mc.ProbeTimeout = t.ProbeInterval, t.ProbeTimeout
	mc.GossipInterval, mc.PushPullInterval = t.GossipInterval, t.PushPullInterval
	mc.SuspicionMult, mc.TCPTimeout = t.SuspicionMult, t.TCPTimeout
	mc.GossipToTheDeadTime = t.PushPullInterval
	mc.DeadNodeReclaimTime = t.PushPullInterval // a failed member may come back at a new address
	mc.Delegate, mc.Events, mc.Conflict, mc.Alive, mc.Ping = m, m, m, m, m
	mc.Logger = log.New(memberlistLog{m.log.With("logger", "memberlist")}, "", 0)
	if len(cfg.GossipKey) > 0 {
		mc.SecretKey = slices.Clone(cfg.GossipKey)
	}
	if cfg.GossipAdvertiseAddr != "" {
		host, port, _ := net.SplitHostPort(cfg.GossipAdvertiseAddr)
		mc.AdvertiseAddr = host
		mc.AdvertisePort, _ = strconv.Atoi(port)
	}
	if cfg.GossipListener != nil {
		mc.Transport = newStreamTransport(cfg.GossipListener, cfg.GossipDialer, t)
	} else {
		host, port, _ := net.SplitHostPort(cfg.GossipAddr)
		if host == "" {
			host = "0.0.0.0"
		}
		p, _ := strconv.Atoi(port)
		nt, err := newNetTransport(host, p, mc.Logger)
		if err != nil {
			m.cancel()
			return fmt.Errorf("node: gossip: listen on %s: %w", cfg.GossipAddr, err)
		}
		mc.Transport, mc.BindAddr, mc.BindPort = nt, host, nt.GetAutoBindPort()
	}
	ml, err := memberlist.Create(mc)
	if err != nil {
		m.cancel()
		mc.Transport.Shutdown()
		return fmt.Errorf("node: gossip: %w", err)
	}
	m.ml = ml
	m.addr = ml.LocalNode().Address()
	for _, s := range cfg.Join {
		if s != m.addr {
			m.seeds = append(m.seeds, s)
		}
	}
	n.members = m

	m.wg.Add(3)
	go m.joinLoop()
	go m.run()
	go m.publishLoop()
	if len(m.seeds) > 0 {
		wait := time.NewTimer(min(t.TCPTimeout, 5*t.ProbeInterval))
		defer wait.Stop()
		select {
		case <-m.firstJoin:
		case <-wait.C: // the attempt goes on in the background
		case <-ctx.Done():
			return fmt.Errorf("node: joining the gossip cluster: %w", ctx.Err())
		}
	}
	if err := m.fatalErr(); err != nil {
		return err
	}
	m.log.Info("gossip started", "gossip_addr", m.addr, "seeds", m.seeds, "bootstrap_expect", cfg.BootstrapExpect, "encrypted", len(cfg.GossipKey) > 0)
	return nil
}

// hasRaftState reports whether this node's Raft has a log, a snapshot or a
// term: it belongs (or belonged) to a cluster and must never bootstrap.
func (n *Node) hasRaftState() bool {
	return n.raft.LastIndex() > 0 || n.raft.CurrentTerm() > 0
}

func (m *gossip) fatalErr() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.fatal
}

func (m *gossip) wake() {
	for _, c := range []chan struct{}{m.poke, m.leadPoke} {
		select {
		case c <- struct{}{}:
		default:
		}
	}
}

// joinLoop joins through the seeds until one of them answered, and again
// whenever the node finds itself alone; and each round it tries to
// reconnect to one failed member (after a partition heals, memberlist alone
// would leave the two sides apart for good).
func (m *gossip) joinLoop() {
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
		if sleepCtx(m.ctx, m.timing.RetryJoinInterval) != nil {
			return
		}
	}
}

// reconnect tries to join one failed member (not one that left).
func (m *gossip) reconnect() {
	var addrs []string
	m.mu.Lock()
	for id, mi := range m.members {
		if id != m.n.cfg.ID && mi.state == MemberDead && mi.gossip != "" {
			addrs = append(addrs, mi.gossip)
		}
	}
	m.mu.Unlock()
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

func (m *gossip) join() {
	contacted, err := m.ml.Join(m.seeds)
	if contacted > 0 {
		m.mu.Lock()
		again := m.joined
		m.joined, m.joinErr = true, ""
		m.mu.Unlock()
		m.n.metrics.gossipJoins.WithLabelValues("ok").Inc()
		if !again {
			m.log.Info("joined the gossip cluster", "seeds_contacted", contacted)
		} else {
			m.log.Info("rejoined the gossip cluster", "seeds_contacted", contacted)
		}
		return
	}
	msg := strings.Join(strings.Fields(fmt.Sprint(err)), " ")
	m.mu.Lock()
	repeated := m.joinErr == msg
	m.joinErr = msg
	m.mu.Unlock()
	m.n.metrics.gossipJoins.WithLabelValues("error").Inc()
	if repeated {
		m.log.Debug("gossip join failed; will retry", "seeds", m.seeds, "err", msg)
	} else {
		m.log.Warn("gossip join failed; will retry", "seeds", m.seeds, "retry_in", m.timing.RetryJoinInterval, "err", msg)
	}
}

// alone reports whether no other member is alive.
func (m *gossip) alone() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for id, mi := range m.members {
		if id != m.n.cfg.ID && mi.state == MemberAlive {
			return false
		}
	}
	return true
}

func (m *gossip) isDown() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.down
}

// run keeps the published metadata current, drives the bootstrap agreement,
// forgets long-gone members, and stops gossip on a fatal id conflict.
func (m *gossip) run() {
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
		select {
		case <-m.ctx.Done():
			return
		case <-m.poke:
		case <-tick.C:
		}
	}
}

// publish has the metadata re-advertised if it changed.
func (m *gossip) publish() {
	state, cid := m.n.hasRaftState(), m.n.ident().ClusterID
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
func (m *gossip) publishLoop() {
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

func (m *gossip) updateTimeout() time.Duration {
	return 5*m.timing.GossipInterval + m.timing.ProbeInterval
}

// prune forgets members that failed or left long ago and are not in the
// Raft configuration.
func (m *gossip) prune() {
	f := m.n.raft.GetConfiguration()
	if f.Error() != nil {
		return
	}
	inConf := map[string]bool{}
	for _, s := range f.Configuration().Servers {
		inConf[nodeOf(s.ID)] = true
	}
	forget := m.n.cfg.reapTimeout() + m.timing.PushPullInterval
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	for id, mi := range m.members {
		if mi.state != MemberAlive && !inConf[id] && now.Sub(mi.since) > forget {
			delete(m.members, id)
		}
	}
}

// shutdownGossip stops memberlist without a leave message. Idempotent.
func (m *gossip) shutdownGossip() {
	m.life.Lock()
	defer m.life.Unlock()
	m.mu.Lock()
	m.down = true
	m.mu.Unlock()
	if err := m.ml.Shutdown(); err != nil {
		m.log.Debug("gossip shutdown", "err", err)
	}
}

// stop ends gossip at once (a crash, or after leave) and waits for the loops.
func (m *gossip) stop() {
	m.cancel()
	m.shutdownGossip()
	m.wg.Wait()
}

// leave is the graceful gossip exit (Close and Leave): broadcast the
// memberlist leave so that members see this node go at once instead of
// suspecting it. Whether the node stays in the Raft configuration depends on
// what it announced before: nothing (a restart: the leader keeps it, and
// reaps it only if it stays away past the reap timeout) or Leaving (Leave:
// the leader has removed it already).
func (m *gossip) leave() {
	m.cancel() // the loops stop; stop() waits for them
	m.life.Lock()
	defer m.life.Unlock()
	if m.isDown() {
		return
	}
	if err := m.ml.Leave(m.leaveTimeout()); err != nil {
		m.log.Info("gossip leave not confirmed", "err", err)
	}
	m.log.Info("left the gossip cluster")
}

func (m *gossip) leaveTimeout() time.Duration {
	return 20*m.n.cfg.Timing.HeartbeatTimeout + 10*m.timing.GossipInterval
}

// announceLeaving publishes that this node decommissions (Leave).
func (m *gossip) announceLeaving() {
	m.mu.Lock()
	m.meta.Leaving = true
	m.mu.Unlock()
	if m.isDown() {
		return
	}
	if err := m.ml.UpdateNode(m.updateTimeout()); err != nil {
		m.log.Debug("leave intent not yet confirmed", "err", err)
	}
}

// conflict logs a refused member once per key and counts it.
func (m *gossip) conflict(reason, key, msg string, args ...any) {
	m.mu.Lock()
	k := reason + "|" + key
	seen := m.reported[k]
	m.reported[k] = true
	m.mu.Unlock()
	if seen {
		return
	}
	m.n.metrics.memberConflicts.WithLabelValues(reason).Inc()
	m.log.Error(msg, append([]any{"reason", reason}, args...)...)
}

// --- memberlist delegates (called with memberlist's lock held) ---

// NodeMeta implements memberlist.Delegate.
func (m *gossip) NodeMeta(limit int) []byte {
	m.mu.Lock()
	b, err := json.Marshal(m.meta)
	m.mu.Unlock()
	if err != nil || len(b) > limit {
		return nil // checked at start; cannot happen
	}
	return b
}

// NotifyMsg implements memberlist.Delegate (no user messages).
func (m *gossip) NotifyMsg([]byte) {}

// GetBroadcasts implements memberlist.Delegate (no user broadcasts).
func (m *gossip) GetBroadcasts(int, int) [][]byte { return nil }

// LocalState implements memberlist.Delegate (no user state).
func (m *gossip) LocalState(bool) []byte { return nil }

// MergeRemoteState implements memberlist.Delegate (no user state).
func (m *gossip) MergeRemoteState([]byte, bool) {}

// NotifyAlive implements memberlist.AliveDelegate: members with bad or
// incompatible metadata, or of another cluster, are refused (memberlist
// then ignores them, so two clusters whose gossip meets stay apart).
func (m *gossip) NotifyAlive(peer *memberlist.Node) error {
	md, reason, err := decodeMeta(peer.Name, peer.Meta)
	if err == nil {
		err = m.foreign(md)
		reason = "cluster_id"
	}
	if err != nil {
		m.conflict(reason, peer.Name+"@"+peer.Address(), "refused gossip member", "member", peer.Name, "gossip_addr", peer.Address(), "err", err)
		m.n.refusals.add(reason, err.Error(), peer.Name+"@"+peer.Address())
		return err
	}
	return nil
}

// errForeignCluster: a member carries another cluster id.
var errForeignCluster = errors.New("node: member of another cluster")

// foreign reports a member of another cluster (both ids known and
// different).
func (m *gossip) foreign(md memberMeta) error {
	if cid := m.n.ident().ClusterID; md.Cluster != "" && cid != "" && md.Cluster != cid {
		return fmt.Errorf("%w: its cluster id is %s, this node's %s", errForeignCluster, md.Cluster, cid)
	}
	return nil
}

// formationCandidates lists the founding nodes gossip shows (formation):
// alive members without Raft state that were started with the same
// BootstrapExpect; or reports that a cluster exists (a member with state),
// or what prevents formation (another BootstrapExpect, too many founders).
func (m *gossip) formationCandidates() ([]formationCandidate, string, string) {
	expect := m.n.cfg.BootstrapExpect
	var cands []formationCandidate
	for id, v := range m.view(time.Now()) {
		if v.State != MemberAlive && v.State != MemberSuspect {
			continue
		}
		switch {
		case id == m.n.cfg.ID:
		case v.Meta.State:
			return nil, v.Addr, ""
		case v.Meta.Expect == 0:
			continue // started to join, not to found
		case v.Meta.Expect != expect:
			m.conflict("bootstrap_expect", id, "member expects another cluster size; not founding until this is fixed",
				"member", id, "its_bootstrap_expect", v.Meta.Expect, "bootstrap_expect", expect)
			return nil, "", fmt.Sprintf("member %s has BootstrapExpect %d, this node %d", id, v.Meta.Expect, expect)
		}
		cands = append(cands, formationCandidate{ID: id, Addr: v.Addr})
	}
	if len(cands) > 2*expect-1 {
		return nil, "", fmt.Sprintf("%d nodes with BootstrapExpect %d: at most %d may found a cluster (start the others without BootstrapExpect)", len(cands), expect, 2*expect-1)
	}
	slices.SortFunc(cands, func(a, b formationCandidate) int { return strings.Compare(a.ID, b.ID) })
	return cands, "", ""
}

// NotifyConflict implements memberlist.ConflictDelegate: two live nodes
// claim one name (id). memberlist keeps the one it knew first.
func (m *gossip) NotifyConflict(existing, other *memberlist.Node) {
	if existing.Name != m.n.cfg.ID {
		m.conflict("duplicate_id", existing.Name+"@"+other.Address(), "refused gossip member: its id is in use by another member",
			"member", other.Name, "gossip_addr", other.Address(), "in_use_by", existing.Address())
		return
	}
	if !m.n.hasRaftState() {
		m.mu.Lock()
		if m.fatal == nil {
			m.fatal = fmt.Errorf("%w: member %q at %s already uses this node's id", ErrDuplicateID, other.Name, other.Address())
		}
		m.mu.Unlock()
		m.wake()
	}
	m.conflict("duplicate_id", other.Name+"@"+other.Address(), "another node claims this node's id", "member", other.Name, "its_gossip_addr", other.Address(), "our_gossip_addr", existing.Address())
}

// NotifyJoin implements memberlist.EventDelegate.
func (m *gossip) NotifyJoin(node *memberlist.Node) { m.observe(node, MemberAlive) }

// NotifyUpdate implements memberlist.EventDelegate.
func (m *gossip) NotifyUpdate(node *memberlist.Node) { m.observe(node, MemberAlive) }

// NotifyLeave implements memberlist.EventDelegate: the member failed, or
// left if it had announced that it was leaving.
func (m *gossip) NotifyLeave(node *memberlist.Node) { m.observe(node, MemberDead) }

func (m *gossip) observe(node *memberlist.Node, state MemberState) {
	md, _, err := decodeMeta(node.Name, node.Meta)
	if err == nil && m.foreign(md) != nil {
		m.mu.Lock()
		delete(m.members, node.Name)
		m.mu.Unlock()
		return
	}
	now := time.Now()
	m.mu.Lock()
	mi := m.members[node.Name]
	if mi == nil {
		if err != nil || state != MemberAlive {
			m.mu.Unlock()
			return
		}
		mi = &memberInfo{}
		m.members[node.Name] = mi
	}
	if err == nil {
		mi.meta = md
	}
	mi.gossip = node.Address()
	if mi.meta.Leaving {
		state = MemberLeft // announced: it leaves as soon as it is removed
	}
	if mi.state != state || mi.since.IsZero() {
		mi.state, mi.since = state, now
	}
	if state == MemberAlive {
		mi.heard = now
	}
	m.mu.Unlock()
	m.wake()
}

// AckPayload implements memberlist.PingDelegate.
func (m *gossip) AckPayload() []byte { return nil }

// NotifyPingComplete implements memberlist.PingDelegate: a direct probe was
// answered.
func (m *gossip) NotifyPingComplete(other *memberlist.Node, _ time.Duration, _ []byte) {
	m.mu.Lock()
	if mi := m.members[other.Name]; mi != nil && mi.state == MemberAlive {
		mi.heard = time.Now()
	}
	m.mu.Unlock()
}

// --- views ---

// memberView is a member as the planners see it.
type memberView struct {
	ID, Addr string
	Gossip   string
	State    MemberState // alive, suspect, dead or left
	Since    time.Time
	Meta     memberMeta
}

// suspectAfter: an alive member not heard from directly for this long is
// reported suspect. memberlist probes members round-robin, one per
// ProbeInterval, reshuffling after each round.
func (m *gossip) suspectAfter(alive int) time.Duration {
	return time.Duration(3*max(alive, 1)+2) * m.timing.ProbeInterval
}

// view returns every known member (this node's own entry uses its current
// metadata).
func (m *gossip) view(now time.Time) map[string]memberView {
	m.mu.Lock()
	defer m.mu.Unlock()
	alive := 0
	for _, mi := range m.members {
		if mi.state == MemberAlive {
			alive++
		}
	}
	out := make(map[string]memberView, len(m.members)+1)
	for id, mi := range m.members {
		v := memberView{ID: id, Addr: mi.meta.Addr, Gossip: mi.gossip, State: mi.state, Since: mi.since, Meta: mi.meta}
		if id == m.n.cfg.ID {
			v.Meta, v.Addr, v.State = m.meta, m.meta.Addr, MemberAlive
		} else if mi.state == MemberAlive && now.Sub(mi.heard) > m.suspectAfter(alive) {
			v.State = MemberSuspect
		}
		out[id] = v
	}
	if _, ok := out[m.n.cfg.ID]; !ok {
		out[m.n.cfg.ID] = memberView{ID: m.n.cfg.ID, Addr: m.meta.Addr, Gossip: m.addr, State: MemberAlive, Since: now, Meta: m.meta}
	}
	return out
}

// status fills the membership part of a Status.
func (m *gossip) status(st *Status) {
	view := m.view(time.Now())
	byID := map[string]int{}
	for _, s := range st.Servers {
		mb := Member{ID: s.ID, Addr: s.Addr, State: MemberUnknown, Role: s.Role, Leader: s.Leader}
		if v, ok := view[s.ID]; ok {
			mb.GossipAddr, mb.State, mb.Since = v.Gossip, v.State, v.Since
		}
		byID[s.ID] = len(st.Members)
		st.Members = append(st.Members, mb)
	}
	for id, v := range view {
		if _, ok := byID[id]; !ok {
			st.Members = append(st.Members, Member{ID: id, Addr: v.Addr, GossipAddr: v.Gossip, State: v.State, Since: v.Since})
		}
	}
	slices.SortFunc(st.Members, func(a, b Member) int { return strings.Compare(a.ID, b.ID) })
	st.GossipAddr = m.addr
	m.mu.Lock()
	switch {
	case m.fatal != nil:
		st.GossipErr = m.fatal.Error()
	case m.joinErr != "":
		st.GossipErr = "join: " + m.joinErr
	}
	m.mu.Unlock()
}

// countMembers counts members by state (the members gauge).
func (m *gossip) countMembers(state MemberState) float64 {
	c := 0
	for _, v := range m.view(time.Now()) {
		if v.State == state {
			c++
		}
	}
	return float64(c)
}

// memberlistLog turns memberlist's "[LEVEL] memberlist: text" lines into
// records of the node's logger: errors become warnings, warnings info, the
// rest debug.
type memberlistLog struct{ l *slog.Logger }

func (w memberlistLog) Write(p []byte) (int, error) {
	s := strings.TrimSpace(string(p))
	level := slog.LevelDebug
	for prefix, lv := range map[string]slog.Level{"[ERR]": slog.LevelWarn, "[ERROR]": slog.LevelWarn, "[WARN]": slog.LevelInfo, "[INFO]": slog.LevelDebug, "[DEBUG]": slog.LevelDebug} {
		if strings.HasPrefix(s, prefix) {
			level, s = lv, strings.TrimSpace(s[len(prefix):])
			break
		}
	}
	s = strings.TrimPrefix(s, "memberlist: ")
	w.l.Log(context.Background(), level, s)
	return len(p), nil
}
