package fence

import (
	"fmt"
	"sync"
)

// Memory is an in-process fence: it remembers, per resource, the highest
// token admitted. The zero value is ready to use. It is safe for concurrent
// use; writes to one resource run one at a time.
type Memory struct {
	// OnReject, if set, is called for every refused stale write (metrics,
	// logging), without locks held.
	OnReject func(resource string, token, highest uint64)

	mu        sync.Mutex
	resources map[string]*memResource
}

type memResource struct {
	mu      sync.Mutex // held during Do's write
	highest uint64
}

func (m *Memory) resource(name string) *memResource {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.resources == nil {
		m.resources = make(map[string]*memResource)
	}
	r := m.resources[name]
	if r == nil {
		r = &memResource{}
		m.resources[name] = r
	}
	return r
}

// Do runs write if token is at least the highest token admitted for
// resource, and records token as the highest — atomically: no other Do or
// Admit on the same resource runs in between. If write returns an error the
// token is still recorded (the holder was current; its write failed). A lower
// token is rejected with an error wrapping ErrStaleToken and write does not
// run.
func (m *Memory) Do(resource string, token uint64, write func() error) error {
	if err := check(resource, token); err != nil {
		return err
	}
	r := m.resource(resource)
	r.mu.Lock()
	defer r.mu.Unlock()
	if token < r.highest {
		if m.OnReject != nil {
			defer m.OnReject(resource, token, r.highest)
		}
		return fmt.Errorf("%w: resource %q token %d < %d", ErrStaleToken, resource, token, r.highest)
	}
	r.highest = token
	if write == nil {
		return nil
	}
	return write()
}

// Admit is Do without a write: it records token as the highest for resource,
// or rejects it with ErrStaleToken.
func (m *Memory) Admit(resource string, token uint64) error { return m.Do(resource, token, nil) }

// Highest returns the highest token admitted for resource (0 if none).
func (m *Memory) Highest(resource string) uint64 {
	r := m.resource(resource)
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.highest
}

func check(resource string, token uint64) error {
	if resource == "" {
		return fmt.Errorf("%w: empty resource", ErrInvalid)
	}
	if token == 0 {
		return fmt.Errorf("%w: zero token (tokens start at 1)", ErrInvalid)
	}
	return nil
}
