// Package membership holds raftlock's membership decisions as pure
// functions, apart from any I/O: how founding nodes agree on one first
// configuration (Acceptor, Ballot, Founder, Candidate), how the leader
// keeps the Raft configuration in line with the members it can see (PlanMembership),
// and what node ids and Raft ids look like (ValidID, RaftIDFor,
// SplitRaftID). The node package runs the loops around them: it gathers
// the inputs (internal/gossip, probes, the Raft configuration), calls the
// planners and carries out what they decide.
package membership

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
)

// Formation: founding one cluster, exactly once.
//
// Nodes without Raft state that are told to found a cluster (a static
// configuration of Peers, or BootstrapExpect = N through gossip) must agree
// on a single first configuration: if two overlapping sets of nodes each
// bootstrapped their own, the same lock could be granted with the same
// token in both. Promises that expire, or "every member I can see agrees",
// are not enough: a partition can hide a promise, and a node that gave up
// waiting can join another set (the split brain of issue 13 #1).
//
// So formation is single-decree Paxos, with the founding configuration as
// the value and the founding nodes as acceptors:
//
//   - An acceptor keeps, in its stable store, the highest ballot it promised
//     and the ballot and value it last accepted. It persists a change before
//     it answers (OnPrepare, OnAccept), so crashes and restarts keep it.
//   - A proposer picks a ballot above every ballot it has seen, sends
//     Prepare to the founding nodes and waits for Quorum promises. If any
//     promise carries an accepted value, it must propose the value with the
//     highest accepted ballot (ChooseValue); only if none does may it
//     propose a value of its own (the founders it heard from). It then sends
//     Accept; once Quorum acceptors accepted, the value is chosen, and the
//     proposer tells the founders in it (Decided).
//   - A founder bootstraps its Raft with a decided value that names it —
//     its node id and its incarnation.
//
// Safety: two quorums always share an acceptor (below), so by the Paxos
// argument at most one value is ever chosen: once value v is chosen at
// ballot b, every proposal at a higher ballot carries v, because its
// promise quorum contains an acceptor that accepted v at b, and any higher
// accepted ballot carries v by induction. Every founder that bootstraps
// uses a chosen value, so every bootstrapped configuration is the same.
// Nothing here depends on timing: partitions, lost or repeated messages,
// crashes and restarts (with the data dir) can delay formation but never
// split it.
//
// Quorum intersection needs a bounded set of acceptors:
//
//   - static Peers: the acceptors are the configured peers, Quorum a
//     majority of them — any two majorities of one set intersect;
//   - BootstrapExpect = N through gossip: the acceptors are the founding
//     nodes that show up, Quorum = N. Two sets of N share a node as long as
//     fewer than 2N nodes (data dirs) ever take part with BootstrapExpect
//     = N. That is the rule for operators: start N (at most 2N−1) nodes
//     with BootstrapExpect = N; start further nodes without it (they join
//     once the cluster exists). A proposer that sees more than 2N−1 refuses
//     to form and says so.
//
// A wiped data dir is a new acceptor (a new incarnation) that forgot its
// promises; it counts towards the 2N−1 of the rule. Liveness: after
// faults heal, one proposer (the smallest node id among those it sees)
// retries with higher ballots; others wait longer before trying, so that
// duelling proposers are rare, and ballots are totally ordered by
// (round, proposer), so a duel always ends.

// Ballot orders proposals: the higher Round wins; equal rounds are ordered
// by Proposer (node id). The zero Ballot is below every proposal.
type Ballot struct {
	Round    uint64 `json:"r"`
	Proposer string `json:"p,omitempty"`
}

// Compare returns -1, 0 or +1 as b is below, equal to or above o.
func (b Ballot) Compare(o Ballot) int {
	if c := cmp.Compare(b.Round, o.Round); c != 0 {
		return c
	}
	return strings.Compare(b.Proposer, o.Proposer)
}

// IsZero reports whether b is the zero ballot (nothing promised or accepted).
func (b Ballot) IsZero() bool { return b == Ballot{} }

// Candidate is a founding node as the proposer sees it before it answered
// (static Peers, or gossip members started with the same BootstrapExpect).
type Candidate struct {
	ID, Addr string
}

// Founder is a node that takes part in founding: its node id, its Raft/RPC
// address and its data dir's incarnation.
type Founder struct {
	ID          string `json:"id"`
	Addr        string `json:"addr"`
	Incarnation string `json:"inc"`
}

// Value is a founding configuration: its founders, sorted by id, each a
// voter of the first Raft configuration.
type Value []Founder

// NewValue returns the founders sorted by id (a canonical Value).
func NewValue(founders []Founder) Value {
	v := slices.Clone(founders)
	slices.SortFunc(v, func(a, b Founder) int { return strings.Compare(a.ID, b.ID) })
	return Value(v)
}

// ClusterID is the id of the cluster founded with v: a hash of its founders
// with their incarnations, which are random, so two formations never share
// an id. Empty for an empty value.
func (v Value) ClusterID() string {
	if len(v) == 0 {
		return ""
	}
	h := sha256.New()
	for _, f := range v {
		fmt.Fprintf(h, "%s\x00%s\x00%s\x00", f.ID, f.Addr, f.Incarnation)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// Names reports whether the value names this founder (its id with this
// incarnation).
func (v Value) Names(id, incarnation string) bool {
	return slices.ContainsFunc(v, func(f Founder) bool { return f.ID == id && f.Incarnation == incarnation })
}

// Equal reports whether two values are the same configuration.
func (v Value) Equal(o Value) bool { return slices.Equal(v, o) }

// Check reports what is wrong with a value: no founders, an empty field, an
// id or address used twice, or not sorted.
func (v Value) Check() error {
	if len(v) == 0 {
		return fmt.Errorf("membership: empty founding value")
	}
	ids, addrs := map[string]bool{}, map[string]bool{}
	for i, f := range v {
		switch {
		case f.ID == "" || f.Addr == "" || f.Incarnation == "":
			return fmt.Errorf("membership: founder %d has an empty field: %+v", i, f)
		case ids[f.ID]:
			return fmt.Errorf("membership: founder id %q twice", f.ID)
		case addrs[f.Addr]:
			return fmt.Errorf("membership: founder address %q twice", f.Addr)
		case i > 0 && v[i-1].ID > f.ID:
			return fmt.Errorf("membership: founders not sorted by id")
		}
		ids[f.ID], addrs[f.Addr] = true, true
	}
	return nil
}

// Acceptor is an acceptor's state. It must be persisted before any answer
// that depends on it is sent.
type Acceptor struct {
	Promised       Ballot `json:"promised"`
	AcceptedBallot Ballot `json:"accepted_ballot"`
	Accepted       Value  `json:"accepted,omitempty"`
	// Decided is a value this node learnt was chosen (Decided), kept so
	// that a crash between learning and bootstrapping bootstraps the same.
	Decided Value `json:"decided,omitempty"`
}

// OnPrepare answers Prepare(b): the acceptor promises b — never to accept a
// lower ballot — if b is above everything it promised; ok is false
// otherwise (the proposer learns Promised and must go higher). The returned
// state is the one to persist and report.
func (a Acceptor) OnPrepare(b Ballot) (next Acceptor, ok bool) {
	if b.Compare(a.Promised) <= 0 {
		return a, false
	}
	a.Promised = b
	return a, true
}

// OnAccept answers Accept(b, v): the acceptor accepts v unless it promised a
// higher ballot.
func (a Acceptor) OnAccept(b Ballot, v Value) (next Acceptor, ok bool) {
	if b.Compare(a.Promised) < 0 || v.Check() != nil {
		return a, false
	}
	a.Promised, a.AcceptedBallot, a.Accepted = b, b, slices.Clone(v)
	return a, true
}

// Promise is an acceptor's answer to Prepare, as the proposer gathers it.
type Promise struct {
	From Founder
	OK   bool     // the acceptor promised this ballot
	Seen Acceptor // its state after answering
}

// ChooseValue is the proposer's decision after phase 1 of ballot b. With
// fewer than quorum OK promises there is nothing to propose (ok false).
// Otherwise, if any promiser has accepted a value, the one with the highest
// accepted ballot must be proposed; only if none has may the proposer
// propose own(promisers), a value of its choosing built from the founders
// that promised (sorted by id) — own returns false if it cannot build one.
func ChooseValue(promises []Promise, quorum int, own func(promisers []Founder) (Value, bool)) (Value, bool) {
	var promisers []Founder
	var best Acceptor
	seen := map[string]bool{}
	for _, p := range promises {
		if !p.OK || seen[p.From.ID] {
			continue // an acceptor counts once, however often it answered
		}
		seen[p.From.ID] = true
		promisers = append(promisers, p.From)
		if len(p.Seen.Accepted) > 0 && p.Seen.AcceptedBallot.Compare(best.AcceptedBallot) > 0 {
			best = p.Seen
		}
	}
	if len(promisers) < quorum || quorum < 1 {
		return nil, false
	}
	if len(best.Accepted) > 0 {
		return slices.Clone(best.Accepted), true
	}
	slices.SortFunc(promisers, func(a, b Founder) int { return strings.Compare(a.ID, b.ID) })
	v, ok := own(promisers)
	if !ok || v.Check() != nil {
		return nil, false
	}
	return v, true
}

// Chosen reports whether at least quorum distinct acceptors accepted the
// ballot's value.
func Chosen(acceptedBy []string, quorum int) bool {
	seen := map[string]bool{}
	for _, id := range acceptedBy {
		seen[id] = true
	}
	return quorum >= 1 && len(seen) >= quorum
}

// NextBallot returns a ballot of proposer above every ballot seen.
func NextBallot(proposer string, seen ...Ballot) Ballot {
	var round uint64
	for _, b := range seen {
		round = max(round, b.Round)
	}
	return Ballot{Round: round + 1, Proposer: proposer}
}

// ExpectValue is the own value for BootstrapExpect = n: the n promisers with
// the smallest ids (promisers are sorted by id). It needs n of them.
func ExpectValue(n int) func([]Founder) (Value, bool) {
	return func(promisers []Founder) (Value, bool) {
		if n < 1 || len(promisers) < n {
			return nil, false
		}
		return NewValue(promisers[:n]), true
	}
}

// PeersValue is the own value of a static configuration: every peer that
// promised (at least a quorum of them, which ChooseValue ensures). Peers
// that did not answer in time join later as new members.
func PeersValue(promisers []Founder) (Value, bool) {
	return NewValue(promisers), len(promisers) > 0
}

// StaticQuorum is the quorum of a static configuration of n peers: a
// majority.
func StaticQuorum(n int) int { return n/2 + 1 }
