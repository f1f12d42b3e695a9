package lockhttp

import (
	"crypto/rand"
	"encoding/hex"
	"sync"
	"time"

	"github.com/raftlock/raftlock/lockapi"
)

// handles maps opaque handles to the leases HTTP clients hold.
type handles struct {
	mu sync.Mutex
	m  map[string]*entry
}

type entry struct {
	lease *lockapi.Lease
	ended time.Time // when a sweep first saw the lease ended
}

func newHandles() *handles { return &handles{m: make(map[string]*entry)} }

// add makes a handle for l. If more than max handles exist, the handles of
// leases that ended are forgotten first (clients asking about them get 404
// unknown_handle): live leases are bounded by the quotas, and this bounds
// the ended ones, which would otherwise wait for the sweep.
func (h *handles) add(l *lockapi.Lease, max int) string {
	var b [16]byte
	rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	h.mu.Lock()
	if len(h.m) >= max {
		for id, e := range h.m {
			if e.lease.Err() != nil {
				delete(h.m, id)
			}
		}
	}
	h.m[id] = &entry{lease: l}
	h.mu.Unlock()
	return id
}

func (h *handles) get(id string) *lockapi.Lease {
	h.mu.Lock()
	defer h.mu.Unlock()
	if e := h.m[id]; e != nil {
		return e.lease
	}
	return nil
}

func (h *handles) remove(id string) {
	h.mu.Lock()
	delete(h.m, id)
	h.mu.Unlock()
}

func (h *handles) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.m)
}

// sweep forgets the handles of leases that ended more than a sweep period
// before cutoff (lost leases whose holders never released them).
func (h *handles) sweep(now, cutoff time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for id, e := range h.m {
		if e.lease.Err() == nil {
			continue
		}
		if e.ended.IsZero() {
			e.ended = now
		} else if e.ended.Before(cutoff) {
			delete(h.m, id)
		}
	}
}
