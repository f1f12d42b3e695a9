package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/raftlock/raftlock/internal/membership"
)

// The formation runner: a node without Raft state that is told to found a
// cluster (Bootstrap with Peers, or BootstrapExpect through gossip) takes
// part in single-decree Paxos with the other founding nodes (the safety
// argument is in internal/membership/formation.go) and bootstraps its Raft
// with the chosen configuration. It stops as soon as the node has Raft state
// — it bootstrapped, or a leader reached it — or finds that a cluster
// already exists: then the node joins it as a new member.

// keyFormation is the stable-store key of the acceptor's state.
var keyFormation = []byte("raftlock/formation")

// formationMsg is a formation request (Prepare, Accept, Decided).
type formationMsg struct {
	Mode   string             `json:"mode"` // must match the acceptor's (formationMode)
	From   membership.Founder `json:"from"`
	Ballot membership.Ballot  `json:"ballot"`
	Value  membership.Value   `json:"value,omitempty"`
}

// formationReply is an acceptor's answer.
type formationReply struct {
	From      membership.Founder  `json:"from"`
	OK        bool                `json:"ok"`
	Seen      membership.Acceptor `json:"seen"`
	HasState  bool                `json:"has_state,omitempty"`  // the acceptor is in a cluster already
	ClusterID string              `json:"cluster_id,omitempty"` // … with this id
	Refused   string              `json:"refused,omitempty"`    // why the acceptor does not take part
}

// formationCandidate is a founding node as the proposer sees it before it
// answered.
type formationCandidate struct {
	ID, Addr string
}

// formation is one node's part in founding: its acceptor (answering any
// proposer) and its proposer (run).
type formation struct {
	n      *Node
	log    *slog.Logger
	mode   string // "static:<hash of Peers>" or "expect:<N>"
	quorum int
	own    func([]membership.Founder) (membership.Value, bool)
	// candidates lists the founding nodes the proposer should ask now
	// (this node included), and whether a member with Raft state was seen
	// (gossip: a cluster exists).
	candidates func() (cands []formationCandidate, existing string, problem string)
	interval   time.Duration

	wake chan struct{}

	mu       sync.Mutex
	acc      membership.Acceptor
	maxSeen  membership.Ballot
	lastPeer time.Time // last Prepare/Accept from another proposer
	state    string    // what formation is doing, for Status
	over     bool      // a cluster exists (or this node founded it): stop
	joinAddr string    // static: a member of the existing cluster to join through
}

// formationMode names what a founding node was told, so that nodes told
// different things (another BootstrapExpect, other Peers) refuse each other.
func formationMode(cfg *Config) string {
	if cfg.BootstrapExpect > 0 {
		return fmt.Sprintf("expect:%d", cfg.BootstrapExpect)
	}
	peers := slices.Clone(cfg.Peers)
	slices.SortFunc(peers, func(a, b Peer) int { return strings.Compare(a.ID, b.ID) })
	var b strings.Builder
	for _, p := range peers {
		fmt.Fprintf(&b, "%s=%s,", p.ID, p.Addr)
	}
	return "static:" + membership.NewValue([]membership.Founder{{ID: "peers", Addr: b.String(), Incarnation: "-"}}).ClusterID()
}

// newFormation loads the acceptor state. quorum and own depend on the mode.
func newFormation(n *Node) (*formation, error) {
	f := &formation{n: n, log: n.log.With("component", "formation"), mode: formationMode(&n.cfg), wake: make(chan struct{}, 1)}
	if n.cfg.BootstrapExpect > 0 {
		f.quorum, f.own = n.cfg.BootstrapExpect, membership.ExpectValue(n.cfg.BootstrapExpect)
		f.interval = max(n.cfg.gossipTiming().ProbeInterval, n.cfg.Timing.HeartbeatTimeout)
	} else {
		f.quorum, f.own = membership.StaticQuorum(len(n.cfg.Peers)), membership.PeersValue
		f.interval = 2 * n.cfg.Timing.HeartbeatTimeout
		f.candidates = n.staticCandidates
	}
	b, err := n.store.stable.Get(keyFormation)
	if err != nil && err.Error() != "not found" {
		return nil, fmt.Errorf("node: read formation state: %w", err)
	}
	if len(b) > 0 {
		if err := json.Unmarshal(b, &f.acc); err != nil {
			return nil, fmt.Errorf("node: formation state in the stable store: %w", err)
		}
	}
	f.maxSeen = f.acc.Promised
	f.lastPeer = time.Now() // others than the smallest id give it time to propose first
	return f, nil
}

// staticCandidates: the configured peers (this node at its own address).
func (n *Node) staticCandidates() ([]formationCandidate, string, string) {
	var out []formationCandidate
	for _, p := range n.cfg.Peers {
		addr := p.Addr
		if p.ID == n.cfg.ID {
			addr = n.trans.Addr()
		}
		out = append(out, formationCandidate{ID: p.ID, Addr: addr})
	}
	return out, "", ""
}

func (f *formation) self() membership.Founder { return formationSelf(f.n) }

// formationSelf is this node as a founder.
func formationSelf(n *Node) membership.Founder {
	id := n.ident()
	return membership.Founder{ID: id.NodeID, Addr: n.trans.Addr(), Incarnation: id.Incarnation}
}

// persist writes the acceptor state (caller holds f.mu).
func (f *formation) persistLocked() error {
	b, err := json.Marshal(f.acc)
	if err != nil {
		return err
	}
	if err := f.n.store.stable.Set(keyFormation, b); err != nil {
		return fmt.Errorf("node: write formation state: %w", err)
	}
	return nil
}

// handle answers a formation request, from a peer or from this node's own
// proposer. A change of the acceptor's state is persisted before the answer
// (an error means no answer).
func (f *formation) handle(op byte, m formationMsg) (formationReply, error) {
	r := formationReply{From: f.self()}
	if f.n.hasRaftState() {
		// Formation is over here. Tell what was decided, so that a founder
		// that missed the decision bootstraps it rather than joining.
		r.HasState, r.ClusterID = true, f.n.ident().ClusterID
		f.mu.Lock()
		r.Seen = f.acc
		f.mu.Unlock()
		return r, nil
	}
	if m.Mode != f.mode {
		r.Refused = fmt.Sprintf("told to found %q, not %q", f.mode, m.Mode)
		return r, nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if m.From.ID != r.From.ID {
		f.lastPeer = time.Now()
	}
	if m.Ballot.Compare(f.maxSeen) > 0 {
		f.maxSeen = m.Ballot
	}
	var next membership.Acceptor
	switch op {
	case opPrepare:
		next, r.OK = f.acc.OnPrepare(m.Ballot)
	case opAccept:
		next, r.OK = f.acc.OnAccept(m.Ballot, m.Value)
	case opDecided:
		next = f.acc
		if err := m.Value.Check(); err != nil {
			return r, err
		}
		self := r.From
		switch {
		case m.Value.Names(self.ID, self.Incarnation):
			if next.Decided == nil {
				next.Decided = m.Value
			}
			r.OK = true
			f.signal()
		case slices.ContainsFunc(m.Value, func(x membership.Founder) bool { return x.ID == self.ID }):
			f.log.Warn("the cluster was founded with an earlier incarnation of this node (its data dir was lost): it joins as a new member",
				"incarnation", self.Incarnation)
		}
	}
	if next.Promised != f.acc.Promised || next.AcceptedBallot != f.acc.AcceptedBallot || !next.Decided.Equal(f.acc.Decided) {
		old := f.acc
		f.acc = next
		if err := f.persistLocked(); err != nil {
			f.acc = old
			return formationReply{}, err
		}
	}
	r.Seen = f.acc
	return r, nil
}

func (f *formation) signal() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

func (f *formation) setState(s string) {
	f.mu.Lock()
	changed := f.state != s
	f.state = s
	f.mu.Unlock()
	if changed {
		f.log.Info("formation", "state", s)
	}
}

// status describes what formation is doing ("" once it is over).
func (f *formation) status() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.over {
		return ""
	}
	return f.state
}

// run takes part in formation until the node has Raft state, a cluster is
// found to exist, or ctx ends.
func (f *formation) run(ctx context.Context) {
	for {
		if f.step(ctx) {
			f.mu.Lock()
			f.over = true
			f.mu.Unlock()
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-f.wake:
		case <-time.After(jitterDur(f.interval)):
		}
	}
}

// step runs one round and reports whether formation is over.
func (f *formation) step(ctx context.Context) bool {
	if f.n.hasRaftState() {
		return true
	}
	f.mu.Lock()
	decided := f.acc.Decided
	f.mu.Unlock()
	self := f.self()
	if decided.Names(self.ID, self.Incarnation) {
		return f.bootstrap(decided)
	}
	cands, existing, problem := f.candidates()
	switch {
	case existing != "":
		f.found(existing, "")
		return true
	case problem != "":
		f.setState(problem)
		return false
	case len(cands) < f.quorum:
		f.setState(fmt.Sprintf("waiting for founding nodes: %d visible, %d needed", len(cands), f.quorum))
		return false
	}
	if !f.myTurn(cands) {
		f.setState("waiting for another node's proposal")
		return false
	}
	return f.propose(ctx, cands)
}

// myTurn: the smallest id proposes every round; the others only when no
// proposer has been heard from for a while (longer the higher their rank),
// so that duels are rare.
func (f *formation) myTurn(cands []formationCandidate) bool {
	ids := make([]string, len(cands))
	for i, c := range cands {
		ids[i] = c.ID
	}
	slices.Sort(ids)
	rank := slices.Index(ids, f.n.cfg.ID)
	if rank <= 0 {
		return true
	}
	f.mu.Lock()
	quiet := time.Since(f.lastPeer)
	f.mu.Unlock()
	return quiet > time.Duration(4*rank)*f.interval
}

// propose runs one ballot; it reports whether formation is over.
func (f *formation) propose(ctx context.Context, cands []formationCandidate) bool {
	f.mu.Lock()
	b := membership.NextBallot(f.n.cfg.ID, f.maxSeen, f.acc.Promised)
	f.maxSeen = b
	f.mu.Unlock()
	f.setState(fmt.Sprintf("proposing (ballot %d)", b.Round))
	msg := formationMsg{Mode: f.mode, From: f.self(), Ballot: b}

	replies := f.ask(ctx, opPrepare, msg, cands)
	var promises []membership.Promise
	promised := map[string]bool{}
	for _, r := range replies {
		if r.HasState {
			if d := r.Seen.Decided; d.Check() == nil && d.Names(msg.From.ID, msg.From.Incarnation) {
				return f.learn(d)
			}
			f.found(r.From.Addr, r.ClusterID)
			return true
		}
		if r.Refused != "" {
			f.n.refusals.add("formation", r.Refused, r.From.ID)
			continue
		}
		f.seen(r.Seen.Promised)
		promises = append(promises, membership.Promise{From: r.From, OK: r.OK, Seen: r.Seen})
		if r.OK {
			promised[r.From.ID] = true
		}
	}
	v, ok := membership.ChooseValue(promises, f.quorum, f.own)
	if !ok {
		return false
	}
	msg.Value = v
	var acceptors []formationCandidate
	for _, c := range cands {
		if promised[c.ID] {
			acceptors = append(acceptors, c)
		}
	}
	var acceptedBy []string
	for _, r := range f.ask(ctx, opAccept, msg, acceptors) {
		f.seen(r.Seen.Promised)
		if r.OK {
			acceptedBy = append(acceptedBy, r.From.ID)
		}
	}
	if !membership.Chosen(acceptedBy, f.quorum) {
		return false
	}
	f.log.Info("founding configuration chosen", "founders", founderIDs(v), "ballot", b.Round, "cluster_id", v.ClusterID())
	var founders []formationCandidate
	for _, x := range v {
		founders = append(founders, formationCandidate{ID: x.ID, Addr: x.Addr})
	}
	f.ask(ctx, opDecided, msg, founders)
	f.signal() // this node's own decision, if it is a founder, is handled next round
	return f.n.hasRaftState()
}

// learn records a decided value that names this node (from a founder that
// bootstrapped it) and bootstraps it.
func (f *formation) learn(v membership.Value) bool {
	f.mu.Lock()
	if f.acc.Decided == nil {
		old := f.acc
		f.acc.Decided = v
		if err := f.persistLocked(); err != nil {
			f.acc = old
			f.mu.Unlock()
			f.log.Warn("cannot record the founding decision; will retry", "err", err)
			return false
		}
	}
	d := f.acc.Decided
	f.mu.Unlock()
	return f.bootstrap(d)
}

// seen raises the highest ballot seen.
func (f *formation) seen(b membership.Ballot) {
	f.mu.Lock()
	if b.Compare(f.maxSeen) > 0 {
		f.maxSeen = b
	}
	f.mu.Unlock()
}

// ask sends one request to every candidate at once (this node's own
// acceptor directly) and returns the answers that came back in time, each
// checked to come from the node it was sent to.
func (f *formation) ask(ctx context.Context, op byte, m formationMsg, cands []formationCandidate) []formationReply {
	ctx, cancel := context.WithTimeout(ctx, 2*f.n.cfg.Timing.ElectionTimeout+f.interval)
	defer cancel()
	out := make([]formationReply, len(cands))
	got := make([]bool, len(cands))
	var wg sync.WaitGroup
	for i, c := range cands {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var r formationReply
			var err error
			if c.ID == f.n.cfg.ID {
				r, err = f.handle(op, m)
			} else {
				err = f.n.callMembership(ctx, c.Addr, op, m, &r)
			}
			if err != nil {
				f.log.Debug("formation request failed", "to", c.ID, "addr", c.Addr, "err", err)
				return
			}
			if r.From.ID != c.ID || (r.From.Addr != c.Addr && c.ID != f.n.cfg.ID) {
				f.log.Warn("formation answer from an unexpected node: ignored", "asked", c.ID, "at", c.Addr, "answered", r.From.ID, "from", r.From.Addr)
				return
			}
			out[i], got[i] = r, true
		}()
	}
	wg.Wait()
	var replies []formationReply
	for i := range out {
		if got[i] {
			replies = append(replies, out[i])
		}
	}
	return replies
}

// found: a cluster exists already (someone has Raft state). This node
// never founds now; it joins.
func (f *formation) found(addr, clusterID string) {
	f.mu.Lock()
	f.joinAddr = addr
	f.mu.Unlock()
	f.setState("a cluster exists: joining it as a new member")
	f.log.Info("found an existing cluster; not founding: this node joins it as a new member", "member", addr, "cluster_id", clusterID)
}

// bootstrap bootstraps Raft with the decided value, which names this node.
func (f *formation) bootstrap(v membership.Value) bool {
	var conf raft.Configuration
	for _, x := range v {
		conf.Servers = append(conf.Servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(raftIDFor(x.ID, x.Incarnation)), Address: raft.ServerAddress(x.Addr)})
	}
	if err := f.n.id.setCluster(v.ClusterID()); err != nil {
		f.log.Error("cannot record the cluster id: not bootstrapping", "err", err)
		return false
	}
	err := f.n.raft.BootstrapCluster(conf).Error()
	switch {
	case err == nil:
		f.log.Info("bootstrapped a new cluster", "founders", founderIDs(v), "cluster_id", v.ClusterID())
	case errors.Is(err, raft.ErrCantBootstrap):
		f.log.Info("not bootstrapping: Raft state appeared meanwhile (the cluster reached this node)")
	case errors.Is(err, raft.ErrRaftShutdown):
		return true
	default:
		f.log.Warn("bootstrap failed; will retry", "err", err)
		return false
	}
	f.setState("")
	return true
}

func founderIDs(v membership.Value) string {
	ids := make([]string, len(v))
	for i, x := range v {
		ids[i] = x.ID
	}
	return strings.Join(ids, ",")
}

// jitterDur returns d ± 10%.
func jitterDur(d time.Duration) time.Duration {
	return d - d/10 + rand.N(d/5+1)
}
