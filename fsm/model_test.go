package fsm

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// model is a naive reference implementation of the lock semantics: plain
// maps and slices, sessions ended by scanning every lock, no copy-on-write,
// no indexes. The rapid test checks the real FSM against it step by step.
type model struct {
	now      int64
	nextSess SessionID
	token    Token
	sessions map[SessionID]time.Duration // live session → lock-delay
	locks    map[string]*mlock
}

type mowner struct {
	session SessionID
	owner   OwnerID
	token   Token
}

type mlock struct {
	holder *mowner
	queue  []mowner
	delay  int64
}

func newModel() *model {
	return &model{now: epoch, sessions: map[SessionID]time.Duration{}, locks: map[string]*mlock{}}
}

func (m *model) lock(name string) *mlock {
	l := m.locks[name]
	if l == nil {
		l = &mlock{}
		m.locks[name] = l
	}
	return l
}

func (m *model) gc() {
	for name, l := range m.locks {
		if l.holder == nil && len(l.queue) == 0 && l.delay == 0 {
			delete(m.locks, name)
		}
	}
}

func (m *model) promote(l *mlock) {
	for len(l.queue) > 0 {
		w := l.queue[0]
		l.queue = l.queue[1:]
		if _, live := m.sessions[w.session]; live {
			m.token++
			w.token = m.token
			l.holder = &w
			return
		}
	}
}

func (m *model) apply(c Command) Result {
	defer m.gc()
	if err := c.Validate(); err != nil {
		return Result{Status: StatusInvalid}
	}
	switch c := c.(type) {
	case OpenSession:
		m.nextSess++
		m.sessions[m.nextSess] = c.LockDelay
		return Result{Status: StatusOK, Session: m.nextSess}
	case CloseSession:
		if _, ok := m.sessions[c.Session]; !ok {
			return Result{Status: StatusNoSession}
		}
		m.end(c.Session, false)
		return Result{Status: StatusOK}
	case ExpireSessions:
		n := 0
		for _, s := range c.Sessions {
			if _, ok := m.sessions[s]; ok {
				m.end(s, true)
				n++
			}
		}
		return Result{Status: StatusOK, Count: n}
	case Acquire:
		if _, ok := m.sessions[c.Session]; !ok {
			return Result{Status: StatusNoSession}
		}
		l := m.lock(c.Lock)
		if l.delay != 0 && m.now >= l.delay {
			l.delay = 0
			if l.holder == nil {
				m.promote(l)
			}
		}
		if l.holder != nil && l.holder.owner == c.Owner {
			if l.holder.session != c.Session {
				return Result{Status: StatusInvalid}
			}
			return Result{Status: StatusGranted, Session: c.Session, Token: l.holder.token}
		}
		for i, w := range l.queue {
			if w.owner == c.Owner {
				if w.session != c.Session {
					return Result{Status: StatusInvalid}
				}
				return Result{Status: StatusQueued, Session: c.Session, Position: i + 1}
			}
		}
		if l.holder == nil && l.delay == 0 {
			m.token++
			l.holder = &mowner{c.Session, c.Owner, m.token}
			return Result{Status: StatusGranted, Session: c.Session, Token: m.token}
		}
		if c.Wait {
			l.queue = append(l.queue, mowner{session: c.Session, owner: c.Owner})
			return Result{Status: StatusQueued, Session: c.Session, Position: len(l.queue)}
		}
		r := Result{Status: StatusLocked, Session: c.Session, DelayUntil: l.delay}
		if l.holder != nil {
			r.Holder = Holder{Session: l.holder.session, Owner: l.holder.owner, Token: l.holder.token}
		}
		return r
	case Release:
		l := m.locks[c.Lock]
		if l == nil {
			return Result{Status: StatusNotHolder}
		}
		if l.holder != nil && l.holder.owner == c.Owner {
			l.holder = nil
			m.promote(l)
			return Result{Status: StatusOK}
		}
		for i, w := range l.queue {
			if w.owner == c.Owner {
				l.queue = slices.Delete(l.queue, i, i+1)
				return Result{Status: StatusOK}
			}
		}
		return Result{Status: StatusNotHolder}
	case Tick:
		n := 0
		for _, name := range slices.Sorted(maps.Keys(m.locks)) {
			l := m.locks[name]
			if l.delay != 0 && m.now >= l.delay {
				n++
				l.delay = 0
				if l.holder == nil {
					m.promote(l)
				}
			}
		}
		return Result{Status: StatusOK, Count: n}
	case Noop:
		return Result{Status: StatusOK}
	}
	panic(fmt.Sprintf("model: unknown command %T", c))
}

// end removes a session by scanning every lock in name order.
func (m *model) end(s SessionID, expired bool) {
	delay := m.sessions[s]
	delete(m.sessions, s)
	for _, name := range slices.Sorted(maps.Keys(m.locks)) {
		l := m.locks[name]
		l.queue = slices.DeleteFunc(l.queue, func(w mowner) bool { return w.session == s })
		if l.holder != nil && l.holder.session == s {
			l.holder = nil
			if expired && delay > 0 {
				l.delay = m.now + int64(delay)
			} else {
				m.promote(l)
			}
		}
	}
}

// sameResult compares the fields the model computes.
func sameResult(got, want Result) bool {
	return got.Status == want.Status && got.Session == want.Session && got.Token == want.Token &&
		got.Position == want.Position && got.Count == want.Count && got.DelayUntil == want.DelayUntil &&
		got.Holder.Session == want.Holder.Session && got.Holder.Owner == want.Holder.Owner && got.Holder.Token == want.Holder.Token
}

var lockNames = []string{"a", "b", "c"}

func TestStateMachineAgainstModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		h := newHarness(rt)
		m := newModel()
		var log [][]byte // every entry applied, for the replay check
		lastToken := map[string]Token{}
		var everSessions []SessionID
		owners := rapid.SampledFrom([]byte{1, 2, 3, 4, 5, 6, 7, 8})

		session := func(rt *rapid.T) SessionID {
			if len(everSessions) == 0 || rapid.IntRange(0, 20).Draw(rt, "unknown") == 0 {
				return SessionID(rapid.Uint64Range(1, 50).Draw(rt, "any session"))
			}
			return rapid.SampledFrom(everSessions).Draw(rt, "session")
		}
		command := func(rt *rapid.T) Command {
			switch rapid.IntRange(0, 9).Draw(rt, "kind") {
			case 0:
				d := rapid.SampledFrom([]time.Duration{0, time.Second, 2 * time.Second}).Draw(rt, "delay")
				return OpenSession{TTL: time.Second, LockDelay: d, Description: "s"}
			case 1:
				return CloseSession{Session: session(rt)}
			case 2:
				return ExpireSessions{Sessions: rapid.SliceOfN(rapid.Custom(session), 1, 3).Draw(rt, "expire")}
			case 3, 4, 5:
				return Acquire{Session: session(rt), Lock: rapid.SampledFrom(lockNames).Draw(rt, "lock"),
					Owner: owner(owners.Draw(rt, "owner")), Wait: rapid.Bool().Draw(rt, "wait")}
			case 6, 7:
				return Release{Lock: rapid.SampledFrom(lockNames).Draw(rt, "lock"), Owner: owner(owners.Draw(rt, "owner"))}
			case 8:
				if rapid.Bool().Draw(rt, "noop") {
					return Noop{}
				}
				return Tick{}
			default:
				return Acquire{Session: session(rt), Lock: "", Owner: owner(1)} // invalid
			}
		}
		applyEntry := func(rt *rapid.T, cmds []Command) {
			b, err := EncodeEntry(Entry{At: h.now, Commands: cmds})
			if err != nil {
				rt.Fatalf("encode: %v", err)
			}
			log = append(log, b)
			h.index++
			resp := h.f.ApplyEntry(h.index, b)
			if resp.Err != nil {
				rt.Fatalf("apply: %v", resp.Err)
			}
			m.now = h.now
			for i, c := range cmds {
				want := m.apply(c)
				if !sameResult(resp.Results[i], want) {
					rt.Fatalf("command %d %T%+v: got %+v, model %+v", i, c, c, resp.Results[i], want)
				}
				if c.Op() == OpOpenSession {
					everSessions = append(everSessions, want.Session)
				}
			}
			for _, e := range h.rec.take() {
				if e.Kind != EventGranted {
					continue
				}
				if e.Token <= lastToken[e.Lock] {
					rt.Fatalf("lock %q granted token %d after %d", e.Lock, e.Token, lastToken[e.Lock])
				}
				lastToken[e.Lock] = e.Token
			}
		}

		rt.Repeat(map[string]func(*rapid.T){
			"single": func(rt *rapid.T) { applyEntry(rt, []Command{command(rt)}) },
			"batch":  func(rt *rapid.T) { applyEntry(rt, rapid.SliceOfN(rapid.Custom(command), 2, 6).Draw(rt, "batch")) },
			"advance": func(rt *rapid.T) {
				h.advance(time.Duration(rapid.IntRange(0, 3000).Draw(rt, "ms")) * time.Millisecond)
			},
			"snapshot-restore": func(rt *rapid.T) {
				before := h.snapshot()
				rec := &recorder{}
				f := New(rec)
				if err := f.Restore(readCloser(before)); err != nil {
					rt.Fatalf("restore: %v", err)
				}
				h.f, h.rec = f, rec
				if after := h.snapshot(); !bytes.Equal(before, after) {
					rt.Fatal("snapshot → restore → snapshot differs")
				}
			},
			"": func(rt *rapid.T) {
				checkAgainstModel(rt, h.f, m)
				checkInvariants(rt, h.f)
			},
		})

		// Determinism: replaying the same log gives byte-identical snapshots.
		replay := newHarness(rt)
		for i, b := range log {
			replay.f.ApplyEntry(uint64(i+1), b)
		}
		if !bytes.Equal(replay.snapshot(), h.snapshot()) {
			rt.Fatal("replaying the log gave a different snapshot")
		}
	})
}

// checkAgainstModel compares the whole lock table and checks the invariants:
// at most one holder per lock, FIFO order as the model, every holder and
// waiter belongs to a live session.
func checkAgainstModel(rt *rapid.T, f *FSM, m *model) {
	locks := f.Locks("", 0)
	if len(locks) != len(m.locks) {
		rt.Fatalf("%d locks, model %d", len(locks), len(m.locks))
	}
	for _, li := range locks {
		ml := m.locks[li.Name]
		if ml == nil {
			rt.Fatalf("lock %q not in the model", li.Name)
		}
		if li.Held != (ml.holder != nil) || li.DelayUntil != ml.delay {
			rt.Fatalf("lock %q: held %v delay %d, model %+v", li.Name, li.Held, li.DelayUntil, ml)
		}
		seen := map[OwnerID]bool{}
		if li.Held {
			if li.Holder.Owner != ml.holder.owner || li.Holder.Token != ml.holder.token || li.Holder.Session != ml.holder.session {
				rt.Fatalf("lock %q: holder %+v, model %+v", li.Name, li.Holder, *ml.holder)
			}
			if _, ok := f.Session(li.Holder.Session); !ok {
				rt.Fatalf("lock %q held by dead session %d", li.Name, li.Holder.Session)
			}
			seen[li.Holder.Owner] = true
		}
		if len(li.Waiters) != len(ml.queue) {
			rt.Fatalf("lock %q: %d waiters, model %d", li.Name, len(li.Waiters), len(ml.queue))
		}
		for i, w := range li.Waiters {
			if w.Owner != ml.queue[i].owner || w.Session != ml.queue[i].session {
				rt.Fatalf("lock %q: waiter %d is %+v, model %+v", li.Name, i, w, ml.queue[i])
			}
			if _, ok := f.Session(w.Session); !ok {
				rt.Fatalf("lock %q: waiter of dead session %d", li.Name, w.Session)
			}
			if seen[w.Owner] {
				rt.Fatalf("lock %q: owner %s twice", li.Name, w.Owner)
			}
			seen[w.Owner] = true
		}
	}
	if st := f.Stats(); st.Sessions != len(m.sessions) || st.LastToken != m.token {
		rt.Fatalf("stats %+v, model sessions %d token %d", st, len(m.sessions), m.token)
	}
}

func readCloser(b []byte) *nopCloser { return &nopCloser{bytes.NewReader(b)} }

type nopCloser struct{ *bytes.Reader }

func (nopCloser) Close() error { return nil }
