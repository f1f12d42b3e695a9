package fence

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// Memory is an in-process fence: it remembers, per resource, the highest
// token admitted. The zero value is ready to use. It is safe for concurrent
// use; writes to one resource run one at a time, writes to different
// resources in parallel.
//
// Memory keeps one entry (the name and a few words) per resource admitted,
// until Forget drops it; Highest and Forget of an unknown resource create
// none. Everything is lost with the process: a fence that must survive a
// restart belongs with the data it protects (SQL, Redis, Object).
type Memory struct {
	// OnReject, if set, is called for every refused stale write or forget
	// (metrics, logging), after the fence's locks were released: it may call
	// the fence. It runs on the caller's goroutine before Do returns.
	OnReject func(resource string, token, highest uint64)

	mu      sync.Mutex
	entries map[string]*memEntry
}

type memEntry struct {
	mu      sync.Mutex    // held during Do's write
	highest atomic.Uint64 // written with mu held; read without
	gone    bool          // forgotten (mu held): look the resource up again
}

// lock returns the resource's entry, created if need be, with its mutex
// held. m.mu is never held while waiting for an entry's mutex.
func (m *Memory) lock(resource string) *memEntry {
	for {
		m.mu.Lock()
		if m.entries == nil {
			m.entries = make(map[string]*memEntry)
		}
		e := m.entries[resource]
		if e == nil {
			e = &memEntry{}
			m.entries[resource] = e
		}
		m.mu.Unlock()
		e.mu.Lock()
		if !e.gone {
			return e
		}
		e.mu.Unlock() // forgotten while we waited: a new entry replaces it
	}
}

func (m *Memory) lookup(resource string) *memEntry {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.entries[resource]
}

// Do runs write if token is at least the highest token admitted for
// resource, and records token as the highest — atomically: no other Do,
// Admit or Forget on the same resource runs in between. If write returns an
// error or panics, the token is still recorded (the holder was current; its
// write failed). A lower token is rejected with an error wrapping
// ErrStaleToken, write does not run, and OnReject is called once the fence
// is unlocked. write runs with the resource locked: it may call Highest but
// must not call Do, Admit or Forget for the same resource (that deadlocks).
func (m *Memory) Do(resource string, token uint64, write func() error) error {
	if err := check(resource, token, MaxToken); err != nil {
		return err
	}
	highest, err := m.do(resource, token, write)
	if highest == 0 {
		return err
	}
	if m.OnReject != nil {
		m.OnReject(resource, token, highest)
	}
	return staleError(resource, token, highest)
}

// do returns the highest token if token was rejected (always > 0 then),
// else 0 and write's result.
func (m *Memory) do(resource string, token uint64, write func() error) (rejectedBy uint64, err error) {
	e := m.lock(resource)
	defer e.mu.Unlock()
	if h := e.highest.Load(); token < h {
		return h, nil
	}
	e.highest.Store(token)
	if write == nil {
		return 0, nil
	}
	return 0, write()
}

// Admit is Do without a write: it records token as the highest for resource,
// or rejects it with ErrStaleToken.
func (m *Memory) Admit(resource string, token uint64) error { return m.Do(resource, token, nil) }

// Highest returns the highest token admitted for resource (0 if none). It
// creates no entry and takes no resource lock, so it may be called from
// anywhere, a write or OnReject included.
func (m *Memory) Highest(resource string) uint64 {
	if e := m.lookup(resource); e != nil {
		return e.highest.Load()
	}
	return 0
}

// Forget drops the entry of a resource that is gone, if token is at least
// its highest token (the caller is current: typically it just deleted the
// resource's data in a Do with the same token); otherwise it returns an
// error wrapping ErrStaleToken and keeps the entry. Forgetting an unknown
// resource does nothing.
//
// After Forget, the fence knows nothing of the resource: a stale holder's
// next Do is admitted as a first write. Forget only resources whose writes
// cannot bring them back in a harmful way (a write to a deleted record that
// finds nothing and stops), or whose stale holders are known to be gone.
func (m *Memory) Forget(resource string, token uint64) error {
	if err := check(resource, token, MaxToken); err != nil {
		return err
	}
	for {
		e := m.lookup(resource)
		if e == nil {
			return nil
		}
		e.mu.Lock()
		if e.gone {
			e.mu.Unlock()
			continue
		}
		if h := e.highest.Load(); token < h {
			e.mu.Unlock()
			if m.OnReject != nil {
				m.OnReject(resource, token, h)
			}
			return staleError(resource, token, h)
		}
		e.gone = true
		m.mu.Lock()
		if m.entries[resource] == e {
			delete(m.entries, resource)
		}
		m.mu.Unlock()
		e.mu.Unlock()
		return nil
	}
}

// Len returns the number of resources the fence keeps an entry for.
func (m *Memory) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.entries)
}

func staleError(resource string, token, highest uint64) error {
	return fmt.Errorf("%w: resource %q token %d < %d", ErrStaleToken, resource, token, highest)
}
