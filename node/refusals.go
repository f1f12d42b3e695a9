package node

import (
	"sync"
	"time"
)

// Refusal is one reason this node was refused by, or refused, another node:
// a membership conflict (duplicate id, address in use, another cluster id),
// a formation mismatch, a handshake refused. Status lists the recent ones so
// that an operator looking at the refused node learns why, not only the
// leader's log.
type Refusal struct {
	Reason string    // a short code: "cluster_id", "duplicate_id", "address", "identity", "formation", …
	Detail string    // what happened, for people
	Peer   string    // the other node (id or address)
	Last   time.Time // when it last happened
	Count  int       // how often since it first happened
}

// maxRefusals bounds the refusals a node remembers.
const maxRefusals = 16

// refusals is a small, bounded, most-recent-first list, deduplicated by
// (reason, peer). Safe for concurrent use.
type refusals struct {
	mu   sync.Mutex
	list []Refusal
}

func (r *refusals) add(reason, detail, peer string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	for i, x := range r.list {
		if x.Reason == reason && x.Peer == peer {
			x.Detail, x.Last, x.Count = detail, now, x.Count+1
			copy(r.list[1:i+1], r.list[:i])
			r.list[0] = x
			return
		}
	}
	r.list = append([]Refusal{{Reason: reason, Detail: detail, Peer: peer, Last: now, Count: 1}}, r.list...)
	if len(r.list) > maxRefusals {
		r.list = r.list[:maxRefusals]
	}
}

func (r *refusals) get() []Refusal {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Refusal(nil), r.list...)
}
