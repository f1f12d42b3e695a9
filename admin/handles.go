package admin

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync"
	"time"

	"github.com/raftlock/raftlock/lockapi"
)

// handles maps opaque handles to the leases HTTP clients hold.
//
// A lease acquired with its own session (the default) is client-kept: the
// client must ask about it (GET /v1/lease or /v1/lease/wait) at least once
// per TTL, or the server releases it — so a client that died does not hold
// its lock for as long as this replica lives. The client's lease has then
// lapsed: the server abandons the session (lockapi.Session.Abandon), which
// releases the lock as an expiry would, into the session's lock-delay. Its
// session is closed when the lease ends. A lease of the shared session
// ("session":"replica") lives until it is released or the session is lost.
type handles struct {
	mu       sync.Mutex
	m        map[string]*entry
	added    chan struct{}  // closed and replaced when a handle is added (addedSignal)
	stopping bool           // the server is stopping: no more windows are reported
	wg       sync.WaitGroup // closing own sessions
}

type entry struct {
	lease *lockapi.Lease
	ended time.Time // when a sweep first saw the lease ended
	// Client-kept leases only:
	own     bool
	ttl     time.Duration
	renewBy time.Time   // the server releases the lease at this time unless asked about it
	watch   *time.Timer // fires at renewBy

	// promised is the end of the latest window reported to the client (the
	// validity of an answer): a graceful stop releases the lease only once
	// it has passed (drain). Monotonic.
	promised  time.Time
	releasing bool // drain is releasing it
}

func newHandles() *handles { return &handles{m: make(map[string]*entry), added: make(chan struct{})} }

// add makes a handle for l. If more than max handles exist, the handles of
// leases that ended are forgotten first (clients asking about them get 404
// unknown_handle): live leases are bounded by the quotas, and this bounds
// the ended ones, which would otherwise wait for the sweep. own (with ttl):
// l's session is its own, closed when l ends, and l is released unless
// renewed within ttl.
func (h *handles) add(l *lockapi.Lease, max int, own bool, ttl time.Duration) string {
	var b [16]byte
	rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	e := &entry{lease: l, own: own, ttl: ttl}
	h.mu.Lock()
	if len(h.m) >= max {
		for id, e := range h.m {
			if e.lease.Err() != nil {
				delete(h.m, id)
			}
		}
	}
	h.m[id] = e
	close(h.added)
	h.added = make(chan struct{})
	if own {
		e.renewBy = time.Now().Add(ttl)
		e.watch = time.AfterFunc(ttl, func() { h.expireUnrenewed(e) })
		h.wg.Add(1)
		context.AfterFunc(l.Context(), func() {
			defer h.wg.Done()
			e.watch.Stop()
			ctx, cancel := context.WithTimeout(context.Background(), unlockWait)
			defer cancel()
			l.Session().Close(ctx) // releases what is left and stops its keepalives
		})
	}
	h.mu.Unlock()
	return id
}

// expireUnrenewed releases a client-kept lease nobody asked about in time:
// its window lapsed, so its session is abandoned (expiry semantics: the
// lock-delay holds), not closed.
func (h *handles) expireUnrenewed(e *entry) {
	h.mu.Lock()
	late := time.Now().After(e.renewBy) || time.Now().Equal(e.renewBy)
	h.mu.Unlock()
	if !late {
		return // renewed meanwhile (the timer was reset)
	}
	ctx, cancel := context.WithTimeout(context.Background(), unlockWait)
	defer cancel()
	e.lease.Session().Abandon(ctx)
}

// get returns the lease of a handle, and for a client-kept one renews it,
// for an answer that reports the lease's window: until is when that window
// ends (the session's validity, and for a client-kept lease the time by
// which it must be asked about again), and the lease stays held at least
// until then, also through a graceful stop. Once the server is stopping,
// the window ends now and a client-kept lease is not renewed.
func (h *handles) get(id string) (l *lockapi.Lease, until time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	e := h.m[id]
	if e == nil {
		return nil, time.Time{}
	}
	now := time.Now()
	if h.stopping || e.lease.Err() != nil {
		return e.lease, now
	}
	until = e.lease.Session().ValidUntil()
	if e.own {
		e.renewBy = now.Add(e.ttl)
		e.watch.Reset(e.ttl)
		until = minTime(until, e.renewBy)
	}
	if until.Before(now) {
		return e.lease, now
	}
	if until.After(e.promised) {
		e.promised = until
	}
	return e.lease, until
}

// lookup returns the lease of a handle (nil if none) without renewing it
// or reporting a window.
func (h *handles) lookup(id string) *lockapi.Lease {
	h.mu.Lock()
	defer h.mu.Unlock()
	if e := h.m[id]; e != nil {
		return e.lease
	}
	return nil
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// kept returns the TTL of handle id's lease if it is client-kept (its own
// session), else 0.
func (h *handles) kept(id string) time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	if e := h.m[id]; e != nil && e.own {
		return e.ttl
	}
	return 0
}

// addedSignal returns a channel closed when the next handle is added.
func (h *handles) addedSignal() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.added
}

// waitLeaseEnds waits until one of the leases of sess on name that have a
// handle ends, or added is closed (a handle was added since the caller
// took it: perhaps the lease in its way), or ctx ends (its error).
func (h *handles) waitLeaseEnds(ctx context.Context, sess *lockapi.Session, name string, added <-chan struct{}) error {
	ended := make(chan struct{}, 1)
	var stops []func() bool
	h.mu.Lock()
	for _, e := range h.m {
		if l := e.lease; l.Session() == sess && l.Name() == name && l.Context().Err() == nil {
			stops = append(stops, context.AfterFunc(l.Context(), func() {
				select {
				case ended <- struct{}{}:
				default:
				}
			}))
		}
	}
	h.mu.Unlock()
	defer func() {
		for _, stop := range stops {
			stop()
		}
	}()
	select {
	case <-ended:
		return nil
	case <-added:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
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

// closeOwn closes the sessions of the client-kept leases (releasing them)
// and waits for it.
func (h *handles) closeOwn(ctx context.Context) {
	h.mu.Lock()
	var own []*entry
	for _, e := range h.m {
		if e.own {
			own = append(own, e)
		}
	}
	h.mu.Unlock()
	for _, e := range own {
		e.lease.Session().Close(ctx)
	}
	h.wg.Wait()
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
