package fsm

import (
	"bytes"
	"crypto/sha256"
	"time"

	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/lockinfo"
)

// recorder is an Observer that keeps every event.
type recorder struct {
	events   []Event
	applied  []uint64
	restored []uint64
}

func (r *recorder) Applied(index uint64, events []Event) {
	r.applied = append(r.applied, index)
	r.events = append(r.events, events...)
}

func (r *recorder) Restored(index uint64) { r.restored = append(r.restored, index) }

// haltRecorder also records halts.
type haltRecorder struct {
	recorder
	halted []uint64
}

func (r *haltRecorder) Halted(index uint64, err error) { r.halted = append(r.halted, index) }

// take returns the events recorded since the last call.
func (r *recorder) take() []Event {
	ev := r.events
	r.events = nil
	return ev
}

// harness drives an FSM through encoded entries, as Raft would.
type harness struct {
	t     tb
	f     *FSM
	rec   *recorder
	index uint64
	now   int64
}

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()

func newHarness(t tb) *harness {
	rec := &recorder{}
	return &harness{t: t, f: New(rec), rec: rec, now: epoch}
}

// advance moves the leader clock forward.
func (h *harness) advance(d time.Duration) { h.now += int64(d) }

// entry applies one entry with the given commands and returns its results.
func (h *harness) entry(cmds ...Command) []Result {
	h.t.Helper()
	b, err := EncodeEntry(Entry{At: h.now, Commands: cmds})
	if err != nil {
		h.t.Fatalf("encode: %v", err)
	}
	h.index++
	resp := h.f.applyEntry(h.index, b)
	if resp.Err != nil {
		h.t.Fatalf("apply: %v", resp.Err)
	}
	if len(resp.Results) != len(cmds) {
		h.t.Fatalf("got %d results for %d commands", len(resp.Results), len(cmds))
	}
	return resp.Results
}

// do applies a single command.
func (h *harness) do(c Command) Result {
	h.t.Helper()
	return h.entry(c)[0]
}

func (h *harness) open(ttl, delay time.Duration, desc string) lockinfo.SessionID {
	h.t.Helper()
	r := h.do(OpenSession{TTL: ttl, LockDelay: delay, Description: desc})
	if r.Status != fsmwire.StatusOK || r.Session == 0 {
		h.t.Fatalf("open session: %+v", r)
	}
	return r.Session
}

func (h *harness) snapshot() []byte {
	h.t.Helper()
	var buf bytes.Buffer
	if err := h.f.WriteSnapshot(&buf); err != nil {
		h.t.Fatalf("snapshot: %v", err)
	}
	return buf.Bytes()
}

// digest is the hash of the state's encoding (also while halted).
func (h *harness) digest() [32]byte {
	_, d := h.f.Digest()
	return d
}

// content is the hash of the state's encoding without the applied index
// and the clock: equal before and after an entry that changed nothing.
func (h *harness) content() [32]byte {
	h.f.mu.Lock()
	st := h.f.st.freeze()
	h.f.mu.Unlock()
	st.index, st.clock = 0, 0
	sum := sha256.New()
	_ = st.encode(sum)
	var d [32]byte
	sum.Sum(d[:0])
	return d
}

func owner(n byte) lockinfo.OwnerID {
	var o lockinfo.OwnerID
	o[0], o[15] = n, 0xA5
	return o
}

func wantStatus(t tb, what string, r Result, s fsmwire.Status) {
	t.Helper()
	if r.Status != s {
		t.Fatalf("%s: status %v, want %v (%+v)", what, r.Status, s, r)
	}
}

func wantHolder(t tb, f *FSM, lock string, o lockinfo.OwnerID) lockinfo.Holder {
	t.Helper()
	h, ok := f.Holder(lock)
	if !ok {
		t.Fatalf("%s: not held, want holder %s", lock, o)
	}
	if h.Owner != o {
		t.Fatalf("%s: held by %s, want %s", lock, h.Owner, o)
	}
	return h
}

func wantFree(t tb, f *FSM, lock string) {
	t.Helper()
	if h, ok := f.Holder(lock); ok {
		t.Fatalf("%s: held by %+v, want free", lock, h)
	}
}

func kinds(evs []Event) []fsmwire.EventKind {
	out := make([]fsmwire.EventKind, len(evs))
	for i, e := range evs {
		out[i] = e.Kind
	}
	return out
}

// tb is what the helpers need of *testing.T, *testing.B and *rapid.T.
type tb interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

// allLocks reads every lock of f page by page, each with all its waiters
// and shared grants (read with Waiters and Lock where a page lists fewer).
func allLocks(f *FSM) []lockinfo.LockInfo {
	var out []lockinfo.LockInfo
	for after := ""; ; {
		page, more := f.Locks("", after, 0)
		for _, li := range page {
			if li.SharedCount > len(li.Shared) {
				full, _ := f.Lock(li.Name)
				li.Shared = full.Shared
			}
			if li.WaiterCount > len(li.Waiters) {
				li.Waiters = allWaiters(f, li.Name)
			}
			out = append(out, li)
		}
		if !more {
			return out
		}
		after = page[len(page)-1].Name
	}
}

// allWaiters reads the whole queue of a lock page by page.
func allWaiters(f *FSM, name string) []lockinfo.Waiter {
	var out []lockinfo.Waiter
	for cursor := ""; ; {
		page, next, err := f.Waiters(name, cursor, 0)
		if err != nil {
			panic(err)
		}
		out = append(out, page...)
		if next == "" {
			return out
		}
		cursor = next
	}
}

// allSessions reads every session of f page by page.
func allSessions(f *FSM) []lockinfo.SessionInfo {
	var out []lockinfo.SessionInfo
	for after := lockinfo.SessionID(0); ; {
		page, more := f.Sessions(after, 0)
		out = append(out, page...)
		if !more {
			return out
		}
		after = page[len(page)-1].ID
	}
}

// allSessionTTLs reads the id, TTL and origin of every session page by
// page.
func allSessionTTLs(f *FSM) []SessionTTL {
	var out []SessionTTL
	for after := lockinfo.SessionID(0); ; {
		page, more := f.SessionTTLs(after, 0)
		out = append(out, page...)
		if !more {
			return out
		}
		after = page[len(page)-1].ID
	}
}
