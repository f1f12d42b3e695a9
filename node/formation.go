package node

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/raftlock/raftlock/internal/membership"
	"github.com/raftlock/raftlock/internal/storage"
)

// The formation runner: a node without Raft state that is told to found a
// cluster (Bootstrap with Peers, or BootstrapExpect through gossip) takes
// part in single-decree Paxos with the other founding nodes (the safety
// argument is in internal/membership/formation.go) and bootstraps its Raft
// with the chosen configuration. It stops as soon as the node has Raft state
// — it bootstrapped, or a leader reached it — or finds that a cluster
// already exists: then the node joins it as a new member.

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
	candidates func() (cands []membership.Candidate, existing string, problem string)
	interval   time.Duration
	static     bool          // founding a static configuration of Peers
	begun      time.Time     // when this node began taking part
	patience   time.Duration // static: how long to wait for every peer before founding with a majority

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
		f.static, f.patience = true, 10*f.interval
	}
	b, err := n.store.Stable.Get(storage.KeyFormation)
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
	f.begun = f.lastPeer
	return f, nil
}

// staticCandidates: the configured peers (this node at its own address).
func (n *Node) staticCandidates() ([]membership.Candidate, string, string) {
	var out []membership.Candidate
	for _, p := range n.cfg.Peers {
		addr := p.Addr
		if p.ID == n.cfg.ID {
			addr = n.trans.Addr()
		}
		out = append(out, membership.Candidate{ID: p.ID, Addr: addr})
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
	if err := f.n.store.Stable.Set(storage.KeyFormation, b); err != nil {
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
