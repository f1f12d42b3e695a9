package gossip

import (
	"encoding/json"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/raftlock/raftlock/internal/membership"
	"github.com/raftlock/raftlock/internal/storage"
)

// Known peers. A node remembers, in its stable store, the gossip address of
// every member of its cluster it has seen alive (like Consul's serf
// snapshot), and reconnects through them to members of its Raft
// configuration that gossip does not show alive. Without it, two gossip
// pools that lost sight of each other — one side restarted while its
// seeds were down, or forgot the other side after a long partition — stay
// apart for good (memberlist merges pools only through a join), and a
// member the leader can no longer see is never added back.

const (
	// maxKnownPeers bounds the known peers kept.
	maxKnownPeers = 64
	// knownPeersSave: the known peers are written at most this often.
	knownPeersSave = 5 * time.Second
)

// knownPeers is node id → gossip address, as last seen alive.
type knownPeers struct {
	stable raft.StableStore

	mu     sync.Mutex
	addrs  map[string]string
	dirty  bool
	saved  time.Time
	loaded bool
}

func (k *knownPeers) load() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.loaded {
		return
	}
	k.loaded = true
	k.addrs = map[string]string{}
	if k.stable == nil {
		return
	}
	if b, err := k.stable.Get(storage.KeyKnownPeers); err == nil && len(b) > 0 {
		var m map[string]string
		if json.Unmarshal(b, &m) == nil {
			for id, a := range m {
				if len(k.addrs) < maxKnownPeers && membership.ValidID(id) == nil && CheckIPPort("peer", a, false, false) == nil {
					k.addrs[id] = a
				}
			}
		}
	}
}

// seen records a member's gossip address.
func (k *knownPeers) seen(id, addr string) {
	k.load()
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.addrs[id] == addr {
		return
	}
	if _, ok := k.addrs[id]; !ok && len(k.addrs) >= maxKnownPeers {
		return
	}
	k.addrs[id], k.dirty = addr, true
}

// all returns every remembered address.
func (k *knownPeers) all() []string {
	k.load()
	k.mu.Lock()
	defer k.mu.Unlock()
	out := make([]string, 0, len(k.addrs))
	for _, a := range k.addrs {
		out = append(out, a)
	}
	return out
}

// get returns the remembered address of member id ("" if none).
func (k *knownPeers) get(id string) string {
	k.load()
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.addrs[id]
}

// save writes the known peers if they changed and the last save is old
// enough (run loop).
func (k *knownPeers) save(now time.Time) {
	k.load()
	k.mu.Lock()
	if !k.dirty || now.Sub(k.saved) < knownPeersSave || k.stable == nil {
		k.mu.Unlock()
		return
	}
	b, err := json.Marshal(k.addrs)
	k.dirty, k.saved = false, now
	k.mu.Unlock()
	if err == nil {
		_ = k.stable.Set(storage.KeyKnownPeers, b) // best effort: a later save retries on change
	}
}

// flush writes the known peers if they changed since the last save, however
// recent (the node stops: a restart must find what it saw last).
func (k *knownPeers) flush() {
	k.load()
	k.mu.Lock()
	k.saved = time.Time{}
	k.mu.Unlock()
	k.save(time.Now())
}

// lostServers returns the remembered gossip addresses of the servers of the
// Raft configuration that gossip does not show alive (or suspect).
func (m *Layer) lostServers() []string {
	conf, ok := m.h.LatestConfig()
	if !ok {
		return nil
	}
	view := m.View(time.Now())
	var addrs []string
	for _, s := range conf.Servers {
		id := membership.NodeOf(s.ID)
		if id == m.cfg.ID {
			continue
		}
		if v, ok := view[id]; ok && (v.State == Alive || v.State == Suspect) {
			continue
		}
		if a := m.known.get(id); a != "" {
			addrs = append(addrs, a)
		}
	}
	return addrs
}

// FlushKnown writes the known peers if they changed since the last save
// (the node stops: a restart finds what gossip showed last).
func (m *Layer) FlushKnown() { m.known.flush() }
