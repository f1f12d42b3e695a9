package chaos

import (
	"errors"
	"sync"

	"github.com/raftlock/raftlock/fence"
)

// Register is the fenced resource of the in-process layer: fence.Memory in
// front of a versioned register (resource → the accepted writes, in order).
// Every attempt gets a sequence number in the order the fence processed it,
// so the checker can replay the fence's decisions.
type Register struct {
	fence fence.Memory
	// Unfenced admits every write (self-test: what the fence prevents).
	Unfenced bool

	mu       sync.Mutex
	seq      uint64
	versions map[string][]Version
}

// NewRegister returns an empty register.
func NewRegister() *Register { return &Register{versions: map[string][]Version{}} }

// Write attempts a fenced write of value with token into resource. It
// returns the attempt's sequence number and fence.ErrStaleToken if the fence
// refused it.
func (r *Register) Write(resource string, token uint64, value string) (uint64, error) {
	r.mu.Lock() // one total order of attempts over all resources
	defer r.mu.Unlock()
	r.seq++
	seq := r.seq
	write := func() error {
		r.versions[resource] = append(r.versions[resource], Version{Token: token, Value: value})
		return nil
	}
	if r.Unfenced {
		return seq, write()
	}
	return seq, r.fence.Do(resource, token, write)
}

// Final returns a copy of the register's state.
func (r *Register) Final() map[string][]Version {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string][]Version, len(r.versions))
	for k, v := range r.versions {
		out[k] = append([]Version(nil), v...)
	}
	return out
}

// IsStale reports whether err is a fence's stale-token refusal.
func IsStale(err error) bool { return errors.Is(err, fence.ErrStaleToken) }
