package fsm

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"

	"github.com/raftlock/raftlock/internal/fsmwire"
)

// FSM is the lock state machine. It implements raft.FSM and raft.BatchingFSM.
// Create it with New; the zero value is not usable.
//
// Apply, ApplyBatch, Snapshot and Restore must be called from one goroutine
// at a time (Raft's FSM goroutine). Read accessors may be called from any
// goroutine concurrently: each holds the state's read lock for O(log n +
// what it returns) at most (listings return pages, see Locks), so that no
// read holds up an apply for long; Halted takes no lock at all.
type FSM struct {
	mu     sync.RWMutex
	st     *state
	obs    Observer
	halted atomic.Pointer[error] // sticky (see ErrHalted); changed under mu, read without it
	events []Event               // scratch buffer of the entry being applied
}

var (
	_ raft.FSM         = (*FSM)(nil)
	_ raft.BatchingFSM = (*FSM)(nil)
)

// New returns an empty state machine. obs may be nil.
func New(obs Observer) *FSM {
	return &FSM{st: newState(), obs: obs}
}

// Apply implements raft.FSM. It returns a *Response, never nil for a command
// entry.
func (f *FSM) Apply(l *raft.Log) interface{} {
	if l.Type != raft.LogCommand {
		f.skip(l.Index)
		return nil
	}
	return f.applyEntry(l.Index, l.Data)
}

// ApplyBatch implements raft.BatchingFSM: it applies the entries in order and
// returns one result per entry, exactly as Apply would.
func (f *FSM) ApplyBatch(logs []*raft.Log) []interface{} {
	out := make([]interface{}, len(logs))
	for i, l := range logs {
		out[i] = f.Apply(l)
	}
	return out
}

// skip records that a non-command entry (a configuration change) was applied.
func (f *FSM) skip(index uint64) {
	f.mu.Lock()
	if f.haltErr() != nil {
		f.mu.Unlock()
		return
	}
	if index > f.st.index {
		f.st.index = index
	}
	f.mu.Unlock()
	if f.obs != nil {
		f.obs.Applied(index, nil)
	}
}

// Halted returns nil while the state machine applies entries, and an error
// wrapping ErrHalted (and ErrUnsupportedVersion) once it met an entry or
// snapshot it cannot apply. It takes no lock: it never waits for an apply
// or a read (a leader's keepalives ask it).
func (f *FSM) Halted() error { return f.haltErr() }

func (f *FSM) haltErr() error {
	if p := f.halted.Load(); p != nil {
		return *p
	}
	return nil
}

// halt records the halt (nil: ends it); the caller holds mu.
func (f *FSM) halt(err error) {
	if err == nil {
		f.halted.Store(nil)
		return
	}
	f.halted.Store(&err)
}

// applyEntry decodes and applies one encoded Entry at the given log index.
// Undecodable data yields a Response with Err set and changes nothing but the
// applied index. An entry of an unknown version (or with a command this
// binary cannot apply) halts the state machine: it and every later entry
// return a Response whose Err wraps ErrHalted, and nothing changes, not even
// the applied index. It is what Apply does with a command entry, exposed
// for tests and tools that drive the state machine without Raft.
func (f *FSM) applyEntry(index uint64, data []byte) *Response {
	resp := &Response{Index: index}
	e, err := DecodeEntry(data)
	if err == nil {
		err = e.unsupported()
	}

	f.mu.Lock()
	if h := f.haltErr(); h != nil {
		resp.Err = h
		f.mu.Unlock()
		return resp
	}
	if errors.Is(err, fsmwire.ErrUnsupportedVersion) {
		resp.Err = fmt.Errorf("%w at log index %d: %w", ErrHalted, index, err)
		f.halt(resp.Err)
		f.mu.Unlock()
		if h, ok := f.obs.(haltObserver); ok {
			h.Halted(index, resp.Err)
		}
		return resp
	}
	st := f.st
	st.restores.dropIdle(index)
	f.events = f.events[:0]
	if err != nil {
		resp.Err = err
	} else {
		a := applier{f: f, st: st, index: index, now: st.entryTime(e.At), events: f.events}
		if len(e.Commands) == 1 {
			resp.Results = resp.one[:]
		} else {
			resp.Results = make([]Result, len(e.Commands))
		}
		for i, c := range e.Commands {
			resp.Results[i] = a.apply(c)
		}
		f.events = a.events
	}
	// The applied index moves after the commands: a restore builds its
	// state with the lock released (applier.restoreCommit), and readers must
	// not see this index on the state before it.
	if index > st.index {
		st.index = index
	}
	f.mu.Unlock()

	if f.obs != nil {
		f.obs.Applied(index, f.events)
	}
	return resp
}

// unsupported reports a command that this binary can decode but not apply:
// a cluster version beyond MaxClusterVersion. Checked before anything of
// the entry is applied, so that a halt leaves no half-applied entry.
func (e Entry) unsupported() error {
	for _, c := range e.Commands {
		if v, ok := c.(SetClusterVersion); ok && v.Version > MaxClusterVersion {
			return fmt.Errorf("%w: cluster version %d (this binary supports up to %d)", fsmwire.ErrUnsupportedVersion, v.Version, MaxClusterVersion)
		}
	}
	return nil
}

// entryTime is the time an entry's commands see. At cluster version 1 the
// FSM's time never goes back (it is the highest stamp applied), as the
// previous release applied it; from version 2 time is informational only
// (stamps of grants and sessions) and every entry sees its own stamp, so
// that one far-off stamp cannot freeze or advance it for later entries.
func (st *state) entryTime(at int64) int64 {
	if st.version >= versionExactlyOnce {
		st.clock = at
		return at
	}
	st.clock = max(st.clock, at)
	return st.clock
}

// applier applies the commands of one entry to the state.
type applier struct {
	f      *FSM // holds f.mu; nil when the applier runs without an FSM
	st     *state
	index  uint64
	now    int64
	events []Event
}

func (a *applier) emit(e Event) {
	e.Index = a.index
	e.At = a.now
	a.events = append(a.events, e)
}

// v2 reports whether the cluster version's semantics are those of version 2.
func (a *applier) v2() bool { return a.st.version >= versionExactlyOnce }

func (a *applier) apply(c Command) Result {
	if err := c.validate(); err != nil {
		return Result{Status: fsmwire.StatusInvalid, Reason: err.Error()}
	}
	if need := NeedsVersion(c); need >= versionPrimitives && need > a.st.version {
		// The node never proposes it; refused here too, so that no state
		// a lower snapshot version cannot carry is ever reached.
		return Result{Status: fsmwire.StatusInvalid, Reason: fmt.Sprintf("%s needs cluster version %d (the cluster is at %d)", c.op(), need, a.st.version)}
	}
	if r, ok := requestOf(c); ok {
		return a.once(c, r)
	}
	return a.exec(c)
}

// exec executes a validated command.
func (a *applier) exec(c Command) Result { return c.exec(a) }
