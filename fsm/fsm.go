package fsm

import (
	"fmt"
	"sync"

	"github.com/hashicorp/raft"
)

// FSM is the lock state machine. It implements raft.FSM and raft.BatchingFSM.
// Create it with New; the zero value is not usable.
//
// Apply, ApplyBatch, Snapshot and Restore must be called from one goroutine
// at a time (Raft's FSM goroutine). Read accessors may be called from any
// goroutine concurrently.
type FSM struct {
	mu     sync.RWMutex
	st     *state
	obs    Observer
	events []Event // scratch buffer of the entry being applied
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
	return f.ApplyEntry(l.Index, l.Data)
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
	if index > f.st.index {
		f.st.index = index
	}
	f.mu.Unlock()
	if f.obs != nil {
		f.obs.Applied(index, nil)
	}
}

// ApplyEntry decodes and applies one encoded Entry at the given log index.
// Undecodable data yields a Response with Err set and changes nothing but the
// applied index. It is what Apply does with a command entry, exposed for
// tests and tools that drive the state machine without Raft.
func (f *FSM) ApplyEntry(index uint64, data []byte) *Response {
	resp := &Response{Index: index}
	e, err := DecodeEntry(data)

	f.mu.Lock()
	st := f.st
	if index > st.index {
		st.index = index
	}
	f.events = f.events[:0]
	if err != nil {
		resp.Err = err
	} else {
		now := st.clock
		if e.At > now {
			now = e.At
		}
		st.clock = now
		a := applier{st: st, index: index, now: now, events: f.events}
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
	f.mu.Unlock()

	if f.obs != nil {
		f.obs.Applied(index, f.events)
	}
	return resp
}

// applier applies the commands of one entry to the state.
type applier struct {
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

func (a *applier) apply(c Command) Result {
	if err := c.Validate(); err != nil {
		return Result{Status: StatusInvalid, Reason: err.Error()}
	}
	switch c := c.(type) {
	case OpenSession:
		return a.openSession(c)
	case CloseSession:
		return a.closeSession(c.Session, ReasonSessionClosed)
	case ExpireSessions:
		return a.expireSessions(c.Sessions)
	case Acquire:
		return a.acquire(c)
	case Release:
		return a.release(c)
	case Tick:
		return a.tick()
	case Noop:
		return Result{Status: StatusOK}
	}
	return Result{Status: StatusInvalid, Reason: fmt.Sprintf("unknown command %T", c)}
}
