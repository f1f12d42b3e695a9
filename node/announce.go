package node

import (
	"context"
	"sync"
	"time"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/lockinfo"
)

// Grant announcements. When a release, an expiry or the end of a lock-delay
// hands a lock to a waiter, the waiter may be on a follower, and a follower
// applies the grant only once it learns the commit index — with the leader's
// next AppendEntries: the next batch, or raft's CommitTimeout tick (up to
// 2 × Timing.CommitTimeout later). So as soon as the leader has applied such an entry, it also tells
// every other replica directly: "these grants are committed". A follower
// hands them to the Subscriptions that asked for early grants
// (replica.EventFilter.EarlyGrants; with OnEarlyGrant, lockapi's, on the RPC's own
// goroutine): the waiter wakes after one RPC instead. A grant
// is announced only to the replica its waiter lives on, when the leader
// knows it (planAnnouncements). (A Noop entry to carry the commit index would
// cost an fsync on every replica and delay the next batch: fewer handoffs
// per second on a contended lock, lockapi's BenchmarkHandoff.)
//
// Announcements are best effort: each peer has one in flight and a bounded
// queue behind it; a peer that cannot be reached drops its queue. The
// grant still reaches every replica through the log, and a waiter that
// missed its announcement wakes when its replica applies the grant.
type announcer struct {
	h announcerHost

	mu      sync.Mutex
	grants  []fsm.Event                   // applied on this leader, not yet queued
	queues  map[string][]fsm.Event        // peer address → grants to send after the one in flight
	busy    map[string]bool               // peer address → an announcement is in flight
	peers   []announcePeer                // the other replicas (cached)
	peersAt time.Time                     // when peers was read
	homes   map[lockinfo.SessionID]string // session → the Raft id of its replica, "" for this one (announce_route.go)
}

// maxPendingGrants bounds the grants kept for a peer (and in one notice).
const maxPendingGrants = fsmwire.MaxGrants

// peersTTL is how long the cached list of peers is used.
const peersTTL = time.Second

// announceTimeout bounds one announcement RPC.
const announceTimeout = time.Second

// announcerHost is what the announcer needs of its node (a narrow seam, so
// that queueing and back-pressure are unit-tested without a cluster).
type announcerHost struct {
	ctx   context.Context                                             // ends when the node closes
	wg    *sync.WaitGroup                                             // the node's goroutines
	peers func() []announcePeer                                       // the other replicas
	send  func(ctx context.Context, addr string, notice []byte) error // one RPC
	sent  func(err error)                                             // metric
}

func newAnnouncer(h announcerHost) *announcer {
	return &announcer{h: h, queues: map[string][]fsm.Event{}, busy: map[string]bool{}, homes: map[lockinfo.SessionID]string{}}
}

// announcerHost returns the node's side of the seam.
func (n *Node) announcerHost() announcerHost {
	return announcerHost{
		ctx: n.ctx, wg: &n.wg, peers: n.announcePeers,
		send: func(ctx context.Context, addr string, notice []byte) error {
			_, err := n.trans.Call(ctx, addr, notice)
			return err
		},
		sent: func(err error) { n.metrics.announcements.WithLabelValues(outcomeLabel(err)).Inc() },
	}
}

// collect keeps the hand-off grants of an applied entry (FSM goroutine; on
// the leader only).
func (a *announcer) collect(events []fsm.Event) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, e := range events {
		if e.Kind == fsmwire.EventGranted && e.FromQueue && len(a.grants) < maxPendingGrants {
			a.grants = append(a.grants, e)
		}
	}
}

// announce queues the grants collected so far for the replicas their
// waiters live on (planAnnouncements) and starts a sender for each peer that
// has none running. It does not wait.
func (a *announcer) announce() {
	a.mu.Lock()
	grants, refresh := a.grants, time.Since(a.peersAt) > peersTTL
	a.grants = nil
	a.mu.Unlock()
	if len(grants) == 0 {
		return
	}
	var peers []announcePeer
	if refresh {
		peers = a.h.peers() // outside the lock: it waits for raft
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if refresh {
		a.peers, a.peersAt = peers, time.Now()
	}
	for p, g := range planAnnouncements(grants, a.homes, a.peers) {
		q := a.queues[p]
		if room := maxPendingGrants - len(q); room < len(g) {
			g = g[:max(room, 0)] // this peer's queue only
		}
		a.queues[p] = append(q, g...)
		if !a.busy[p] && len(a.queues[p]) > 0 {
			a.busy[p] = true
			a.h.wg.Add(1)
			go a.send(p)
		}
	}
}

// send delivers a peer's queue, one notice at a time, until it is empty.
func (a *announcer) send(addr string) {
	defer a.h.wg.Done()
	for {
		a.mu.Lock()
		q := a.queues[addr]
		delete(a.queues, addr)
		if len(q) == 0 || a.h.ctx.Err() != nil {
			a.busy[addr] = false
			a.mu.Unlock()
			return
		}
		a.mu.Unlock()
		ctx, cancel := context.WithTimeout(a.h.ctx, announceTimeout)
		err := a.h.send(ctx, addr, encodeGrantNotice(q))
		cancel()
		a.h.sent(err)
		if err != nil {
			// Unreachable or slow: what queued meanwhile would be late too.
			a.mu.Lock()
			delete(a.queues, addr)
			a.busy[addr] = false
			a.mu.Unlock()
			return
		}
	}
}
