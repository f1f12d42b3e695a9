package node

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/raft"
)

// Bootstrap agreement (BootstrapExpect = N).
//
// Bootstrapping different configurations on overlapping sets of nodes could
// elect two leaders, so nodes first agree on one configuration through their
// gossip metadata:
//
//  1. A node without Raft state looks at the alive members that have no Raft
//     state and a BootstrapExpect (all must say N, otherwise it refuses and
//     reports the mismatch). Once it sees at least N, the candidate set is
//     the N smallest ids (with their Raft addresses): every node with the
//     same view picks the same set, also when more than N showed up; nodes
//     outside the set never bootstrap and are added later by the leader.
//  2. A node in the candidate set promises it: it publishes the hash of the
//     set. A promise is sticky: it is only replaced (by the node's current
//     candidate set) after promiseTimeout, and never once a member of the
//     promised set has Raft state.
//  3. A node bootstraps with its promised set once every member of the set
//     is alive and publishes the same promise, or once a member with Raft
//     state publishes it (it bootstrapped that very configuration).
//
// Two different sets cannot both be fully promised while their members keep
// their promises, so every node that bootstraps uses the same configuration.
// A node that sees a member with Raft state and another (or no) promise
// found an existing cluster: it never bootstraps. A node with Raft state of
// its own never bootstraps either.
type bootstrapState struct {
	done       bool
	promise    []Peer // sorted by id
	hash       string
	promisedAt time.Time
	waiting    int // visible candidates last logged
}

const promiseHexLen = 16

func promiseHash(peers []Peer) string {
	h := sha256.New()
	for _, p := range peers {
		h.Write([]byte(p.ID))
		h.Write([]byte{0})
		h.Write([]byte(p.Addr))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))[:promiseHexLen]
}

func (m *membership) promiseTimeout() time.Duration {
	return 5*m.timing.ProbeInterval + 10*m.timing.GossipInterval
}

// bootstrapStep runs one round of the agreement (run loop only).
func (m *membership) bootstrapStep() {
	b := &m.boot
	expect := m.n.cfg.BootstrapExpect
	if expect == 0 || b.done {
		return
	}
	self := m.n.cfg.ID
	if m.n.hasRaftState() {
		b.done = true // a promise stays published: peers may still need it
		m.log.Info("raft state present; not bootstrapping")
		return
	}
	now := time.Now()
	view := m.view(now)
	var ids []string
	for id := range view {
		ids = append(ids, id)
	}
	slices.Sort(ids)

	// An existing cluster?
	for _, id := range ids {
		v := view[id]
		if id == self || !v.Meta.State || (v.State != MemberAlive && v.State != MemberSuspect) {
			continue
		}
		if b.hash != "" && v.Meta.Promise == b.hash {
			m.bootstrap("member " + id + " bootstrapped the agreed configuration")
			return
		}
		b.done = true
		m.setPromise(nil, "")
		m.log.Info("found an existing cluster; not bootstrapping: waiting for its leader to add this node", "member_with_state", id)
		return
	}

	var cands []Peer
	for _, id := range ids {
		v := view[id]
		if v.Meta.Expect == 0 || (v.State != MemberAlive && v.State != MemberSuspect) {
			continue
		}
		if v.Meta.Expect != expect {
			m.conflict("bootstrap_expect", id, "member expects another cluster size; not bootstrapping until this is fixed",
				"member", id, "its_bootstrap_expect", v.Meta.Expect, "bootstrap_expect", expect)
			return
		}
		cands = append(cands, Peer{ID: id, Addr: v.Meta.Addr})
	}
	expired := b.hash != "" && now.Sub(b.promisedAt) >= m.promiseTimeout()
	if len(cands) < expect {
		if expired {
			m.setPromise(nil, "")
		}
		if len(cands) != b.waiting {
			b.waiting = len(cands)
			m.log.Info("waiting for peers to bootstrap", "visible", len(cands), "bootstrap_expect", expect)
		}
		return
	}
	cands = cands[:expect]
	addrs := map[string]string{}
	for _, p := range cands {
		if other, dup := addrs[p.Addr]; dup {
			m.conflict("address", p.ID+"|"+other+"|"+p.Addr, "two members advertise the same Raft address; not bootstrapping",
				"member", p.ID, "other", other, "addr", p.Addr)
			return
		}
		addrs[p.Addr] = p.ID
	}
	if !slices.ContainsFunc(cands, func(p Peer) bool { return p.ID == self }) {
		if expired {
			m.setPromise(nil, "")
		}
		return // not among the first N: the leader will add this node
	}
	h := promiseHash(cands)
	switch {
	case b.hash == "" || (b.hash != h && expired):
		m.setPromise(cands, h)
		m.log.Info("agreeing to bootstrap", "configuration", peerIDs(cands), "promise", h)
		return
	case b.hash != h:
		return // keep the earlier promise for now
	}
	for _, p := range b.promise {
		v, ok := view[p.ID]
		if !ok || v.Meta.Promise != h || v.Meta.Addr != p.Addr || (v.State != MemberAlive && v.State != MemberSuspect) {
			return
		}
	}
	m.bootstrap("every member agreed")
}

// setPromise changes the published promise (nil clears it).
func (m *membership) setPromise(peers []Peer, hash string) {
	b := &m.boot
	if b.hash == hash {
		return
	}
	b.promise, b.hash, b.promisedAt = peers, hash, time.Now()
	m.mu.Lock()
	m.meta.Promise, m.metaDirty = hash, true
	m.mu.Unlock()
}

// bootstrap bootstraps the running Raft with the promised configuration.
func (m *membership) bootstrap(why string) {
	b := &m.boot
	var conf raft.Configuration
	for _, p := range b.promise {
		conf.Servers = append(conf.Servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.Addr)})
	}
	err := m.n.raft.BootstrapCluster(conf).Error()
	switch {
	case err == nil:
		m.log.Info("bootstrapped a new cluster", "configuration", peerIDs(b.promise), "why", why)
	case errors.Is(err, raft.ErrCantBootstrap):
		m.log.Info("not bootstrapping: raft state appeared meanwhile (the cluster reached this node)")
	case errors.Is(err, raft.ErrRaftShutdown):
		return
	default:
		m.log.Warn("bootstrap failed; will retry", "err", err)
		return
	}
	b.done = true
	m.mu.Lock()
	m.metaDirty = true // State (and the promise, which peers may still need)
	m.mu.Unlock()
}

func peerIDs(peers []Peer) string {
	ids := make([]string, len(peers))
	for i, p := range peers {
		ids[i] = p.ID
	}
	return strings.Join(ids, ",")
}
