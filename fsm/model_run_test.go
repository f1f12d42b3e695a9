package fsm

import (
	"bytes"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/lockinfo"
)

var lockNames = []string{"a", "b", "c"}

// client is what the test remembers of one session's requests.
type client struct {
	last, acked uint64
}

// TestStateMachineAgainstModel applies random entries — at cluster version 1,
// up to version 4, or upgrading on the way; with request numbers, duplicates,
// reordered and acknowledged-then-redelivered requests, delays ended by
// EndDelay, lapsed closes and releases, revocations of exclusive and shared
// grants, renewals and takeover markers (each session's origin marker is
// compared), quotas, time jumping both ways, snapshots — to the FSM and to
// the model, and compares results and state after every step.
func TestStateMachineAgainstModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		h := newHarness(rt)
		m := newModel()
		var log [][]byte // every entry applied, for the replay check
		lastToken := map[string]lockinfo.Token{}
		var everSessions []lockinfo.SessionID
		clients := map[lockinfo.SessionID]*client{}
		var sent []Command // every command with a request number
		owners := rapid.SampledFrom([]byte{1, 2, 3, 4, 5, 6, 7, 8})

		session := func(rt *rapid.T) lockinfo.SessionID {
			if len(everSessions) == 0 || rapid.IntRange(0, 20).Draw(rt, "unknown") == 0 {
				return lockinfo.SessionID(rapid.Uint64Range(1, 50).Draw(rt, "any session"))
			}
			return rapid.SampledFrom(everSessions).Draw(rt, "session")
		}
		// request numbers a new request of session s: the next number (or a
		// skipped one, as when a request is still on its way), and an
		// acknowledgement that mostly moves forward.
		request := func(rt *rapid.T, s lockinfo.SessionID) (uint64, uint64) {
			if rapid.IntRange(0, 5).Draw(rt, "no seq") == 0 {
				return 0, 0
			}
			c := clients[s]
			if c == nil {
				c = &client{}
				clients[s] = c
			}
			c.last += uint64(rapid.IntRange(1, 2).Draw(rt, "seq step"))
			ack := rapid.Uint64Range(min(c.acked, c.last), c.last).Draw(rt, "ack")
			if rapid.IntRange(0, 6).Draw(rt, "old ack") == 0 {
				ack = rapid.Uint64Range(0, ack).Draw(rt, "older ack")
			}
			c.acked = max(c.acked, ack)
			return c.last, ack
		}
		value := func(rt *rapid.T) string {
			return rapid.SampledFrom([]string{"", "", "v1", "v2"}).Draw(rt, "value")
		}
		command := func(rt *rapid.T) Command {
			switch rapid.IntRange(0, 19).Draw(rt, "kind") {
			case 0:
				d := rapid.SampledFrom([]time.Duration{0, time.Second, 2 * time.Second}).Draw(rt, "delay")
				c := OpenSession{TTL: time.Second, LockDelay: d, Description: "s"}
				if rapid.IntRange(0, 2).Draw(rt, "from a node") > 0 { // cluster version 4
					c.Node = rapid.SampledFrom([]string{"n1", "n1", "n2", "?"}).Draw(rt, "node")
					c.Reserved = rapid.IntRange(0, 3).Draw(rt, "reserved") == 0
				}
				return c
			case 1:
				s := session(rt)
				seq, ack := request(rt, s)
				return CloseSession{Session: s, Seq: seq, AckBelow: ack, Lapsed: rapid.Bool().Draw(rt, "lapsed")}
			case 2:
				return ExpireSessions{Sessions: rapid.SliceOfN(rapid.Custom(session), 1, 3).Draw(rt, "expire")}
			case 3, 4, 5:
				s := session(rt)
				seq, ack := request(rt, s)
				return Acquire{Session: s, Lock: rapid.SampledFrom(lockNames).Draw(rt, "lock"),
					Owner: owner(owners.Draw(rt, "owner")), Wait: rapid.Bool().Draw(rt, "wait"), Seq: seq, AckBelow: ack}
			case 6, 7:
				c := Release{Lock: rapid.SampledFrom(lockNames).Draw(rt, "lock"), Owner: owner(owners.Draw(rt, "owner"))}
				if live := liveAcquisitions(h.f); len(live) > 0 && rapid.Bool().Draw(rt, "an existing one") {
					a := rapid.SampledFrom(live).Draw(rt, "acquisition") // a waiter leaving, a grant ending
					c = Release{Session: a.Session, Lock: a.Lock, Owner: a.Owner, Lapsed: rapid.Bool().Draw(rt, "lapsed")}
					c.Seq, c.AckBelow = request(rt, c.Session)
					return c
				}
				if rapid.Bool().Draw(rt, "with session") {
					c.Session = session(rt)
					c.Seq, c.AckBelow = request(rt, c.Session)
					c.Lapsed = rapid.Bool().Draw(rt, "lapsed")
				}
				return c
			case 8:
				if len(sent) > 0 { // a duplicate: delayed, reordered, maybe after its ack
					return rapid.SampledFrom(sent).Draw(rt, "duplicate")
				}
				return Noop{}
			case 9:
				switch rapid.IntRange(0, 3).Draw(rt, "leader command") {
				case 0:
					return Noop{}
				case 1: // a renewal of sessions (version 4)
					return Renewed{Sessions: rapid.SliceOfN(rapid.Custom(session), 0, 3).Draw(rt, "renewed")}
				case 2: // a takeover marker (version 4)
					return Takeover{}
				}
				return Tick{}
			case 10:
				var refs []DelayRef
				for _, d := range h.f.DelayedLocks() {
					switch rapid.IntRange(0, 2).Draw(rt, "end it") {
					case 1:
						refs = append(refs, d.DelayRef)
					case 2: // a stale reference: another delay of the lock
						refs = append(refs, DelayRef{Lock: d.Lock, Token: d.Token + 1})
					}
				}
				return EndDelay{Delays: refs}
			case 11:
				l := Limits{
					MaxLockNameLen: rapid.SampledFrom([]int{0, 1, 512}).Draw(rt, "name len"), MaxWaitersPerLock: rapid.IntRange(0, 6).Draw(rt, "waiters"),
					MaxLocksPerSession: rapid.IntRange(0, 3).Draw(rt, "locks"), MaxSessions: rapid.IntRange(0, 6).Draw(rt, "sessions"),
					RequestWindow: rapid.IntRange(0, 4).Draw(rt, "window")}
				if rapid.Bool().Draw(rt, "fair shares") { // cluster version 4
					l.MaxLocks, l.NodeShares = rapid.IntRange(0, 8).Draw(rt, "max locks"), rapid.IntRange(0, 2).Draw(rt, "node shares")
					l.MaxStateBytes = rapid.SampledFrom([]int64{0, 1500, 2500, 5000}).Draw(rt, "max bytes")
					l.MaxSessionWaitersPerLock = rapid.IntRange(0, 2).Draw(rt, "session waiters")
				}
				return SetLimits{Limits: l}
			case 12:
				if rapid.Bool().Draw(rt, "cluster id") {
					return InitCluster{ID: rapid.SampledFrom([]string{"c1", "c2"}).Draw(rt, "id")}
				}
				return SetClusterVersion{Version: rapid.Uint64Range(1, MaxClusterVersion).Draw(rt, "version")}
			case 13, 14: // a read grant, maybe with a value
				s := session(rt)
				seq, ack := request(rt, s)
				return Acquire{Session: s, Lock: rapid.SampledFrom(lockNames).Draw(rt, "lock"), Owner: owner(owners.Draw(rt, "owner")),
					Wait: rapid.Bool().Draw(rt, "wait"), Shared: true, Value: value(rt), Seq: seq, AckBelow: ack}
			case 15, 16: // permits of a semaphore (sometimes of another limit)
				s := session(rt)
				seq, ack := request(rt, s)
				limit := rapid.SampledFrom([]int{3, 3, 3, 2}).Draw(rt, "limit")
				return Acquire{Session: s, Lock: rapid.SampledFrom([]string{"s", "s", "a"}).Draw(rt, "semaphore"), Owner: owner(owners.Draw(rt, "owner")),
					Wait: rapid.Bool().Draw(rt, "wait"), Limit: limit, Permits: rapid.IntRange(1, limit).Draw(rt, "permits"), Value: value(rt), Seq: seq, AckBelow: ack}
			case 17:
				s := session(rt)
				seq, ack := request(rt, s)
				return SetValue{Session: s, Lock: rapid.SampledFrom(append(lockNames, "s")).Draw(rt, "lock"), Owner: owner(owners.Draw(rt, "owner")),
					Value: value(rt), Seq: seq, AckBelow: ack}
			case 18:
				if rapid.Bool().Draw(rt, "raise") {
					return RaiseTokens{}
				}
				s := session(rt) // an exclusive acquisition with a value
				seq, ack := request(rt, s)
				return Acquire{Session: s, Lock: rapid.SampledFrom(lockNames).Draw(rt, "lock"), Owner: owner(owners.Draw(rt, "owner")),
					Wait: rapid.Bool().Draw(rt, "wait"), Value: value(rt), Seq: seq, AckBelow: ack}
			case 19: // an operator's revoke: of a grant (exclusive or shared), or a stale token
				if live := liveGrants(h.f); len(live) > 0 && rapid.IntRange(0, 3).Draw(rt, "stale") > 0 {
					return rapid.SampledFrom(live).Draw(rt, "grant")
				}
				return Revoke{Lock: rapid.SampledFrom(append(lockNames, "s")).Draw(rt, "lock"), Token: lockinfo.Token(rapid.Uint64Range(1, 40).Draw(rt, "token"))}
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
			resp := h.f.applyEntry(h.index, b)
			if resp.Err != nil {
				rt.Fatalf("apply: %v", resp.Err)
			}
			m.entry(h.index, h.now)
			for i, c := range cmds {
				want := m.apply(c)
				if !sameResult(resp.Results[i], want) {
					rt.Fatalf("command %d %T%+v: got %+v, model %+v", i, c, c, resp.Results[i], want)
				}
				if c.op() == fsmwire.OpOpenSession && want.Status == fsmwire.StatusOK {
					everSessions = append(everSessions, want.Session)
				}
				if _, ok := requestOf(c); ok {
					sent = append(sent, c)
				}
			}
			for _, e := range h.rec.take() {
				if e.Kind != fsmwire.EventGranted {
					continue
				}
				if e.Token <= lastToken[e.Lock] {
					rt.Fatalf("lock %q granted token %d after %d", e.Lock, e.Token, lastToken[e.Lock])
				}
				lastToken[e.Lock] = e.Token
			}
		}

		if v := rapid.Uint64Range(1, MaxClusterVersion).Draw(rt, "start at version"); v > 1 {
			applyEntry(rt, []Command{SetClusterVersion{Version: v}})
		}
		rt.Repeat(map[string]func(*rapid.T){
			"single": func(rt *rapid.T) { applyEntry(rt, []Command{command(rt)}) },
			"batch":  func(rt *rapid.T) { applyEntry(rt, rapid.SliceOfN(rapid.Custom(command), 2, 6).Draw(rt, "batch")) },
			"pile-up": func(rt *rapid.T) { // contention on one name: queues of mixed kinds
				name := rapid.SampledFrom([]string{"a", "s"}).Draw(rt, "name")
				var cmds []Command
				for range rapid.IntRange(2, 5).Draw(rt, "contenders") {
					s := session(rt)
					seq, ack := request(rt, s)
					c := Acquire{Session: s, Lock: name, Owner: owner(owners.Draw(rt, "owner")), Wait: true, Seq: seq, AckBelow: ack}
					if name == "s" {
						c.Limit, c.Permits = 3, rapid.IntRange(1, 3).Draw(rt, "permits")
					} else {
						c.Shared = rapid.Bool().Draw(rt, "shared")
					}
					cmds = append(cmds, c)
				}
				applyEntry(rt, cmds)
			},
			"advance": func(rt *rapid.T) {
				h.advance(time.Duration(rapid.IntRange(-1000, 3000).Draw(rt, "ms")) * time.Millisecond)
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
				checkUsage(rt, h.f, m)
			},
		})

		// Determinism: replaying the same log gives byte-identical snapshots.
		replay := newHarness(rt)
		for i, b := range log {
			replay.f.applyEntry(uint64(i+1), b)
		}
		if !bytes.Equal(replay.snapshot(), h.snapshot()) {
			rt.Fatal("replaying the log gave a different snapshot")
		}
	})
}

// liveAcquisitions lists every grant and waiter of f, in name order.
func liveAcquisitions(f *FSM) []Event {
	var out []Event
	for _, li := range allLocks(f) {
		if li.Held {
			out = append(out, Event{Lock: li.Name, Session: li.Holder.Session, Owner: li.Holder.Owner})
		}
		for _, g := range li.Shared {
			out = append(out, Event{Lock: li.Name, Session: g.Session, Owner: g.Owner})
		}
		for _, w := range li.Waiters {
			out = append(out, Event{Lock: li.Name, Session: w.Session, Owner: w.Owner})
		}
	}
	return out
}

// liveGrants lists a Revoke of every grant of f (exclusive and shared), in
// name order.
func liveGrants(f *FSM) []Revoke {
	var out []Revoke
	for _, li := range allLocks(f) {
		if li.Held {
			out = append(out, Revoke{Lock: li.Name, Token: li.Holder.Token})
		}
		for _, g := range li.Shared {
			out = append(out, Revoke{Lock: li.Name, Token: g.Token})
		}
	}
	return out
}

// checkAgainstModel compares the whole lock table and checks the invariants:
// at most one holder per lock, FIFO order as the model, every holder and
// waiter belongs to a live session.
func checkAgainstModel(rt *rapid.T, f *FSM, m *model) {
	locks := allLocks(f)
	if len(locks) != len(m.locks) {
		rt.Fatalf("%d locks, model %d", len(locks), len(m.locks))
	}
	for _, li := range locks {
		ml := m.locks[li.Name]
		if ml == nil {
			rt.Fatalf("lock %q not in the model", li.Name)
		}
		if li.Held != (ml.holder != nil) || li.Delayed != ml.delayed || li.DelayUntil != ml.until ||
			int64(li.DelayFor) != ml.delayFor || li.DelayToken != ml.delayToken || li.Limit != ml.limit || li.Used != ml.used() {
			rt.Fatalf("lock %q: %+v, model %+v", li.Name, li, ml)
		}
		seen := map[lockinfo.OwnerID]bool{}
		if li.Held {
			if li.Holder.Owner != ml.holder.owner || li.Holder.Token != ml.holder.token || li.Holder.Session != ml.holder.session ||
				li.Holder.Value != ml.holder.value {
				rt.Fatalf("lock %q: holder %+v, model %+v", li.Name, li.Holder, *ml.holder)
			}
			if _, ok := f.Session(li.Holder.Session); !ok {
				rt.Fatalf("lock %q held by dead session %d", li.Name, li.Holder.Session)
			}
			seen[li.Holder.Owner] = true
		}
		if len(li.Shared) != len(ml.shared) {
			rt.Fatalf("lock %q: %d shared grants, model %d", li.Name, len(li.Shared), len(ml.shared))
		}
		for i, g := range li.Shared {
			mg := ml.shared[i]
			if g.Owner != mg.owner || g.Session != mg.session || g.Token != mg.token || g.Permits != mg.permits || g.Value != mg.value ||
				g.Shared != (ml.limit == 0) {
				rt.Fatalf("lock %q: shared grant %d is %+v, model %+v", li.Name, i, g, mg)
			}
			if _, ok := f.Session(g.Session); !ok || seen[g.Owner] {
				rt.Fatalf("lock %q: bad shared grant %+v", li.Name, g)
			}
			seen[g.Owner] = true
		}
		if len(li.Waiters) != len(ml.queue) {
			rt.Fatalf("lock %q: %d waiters, model %d", li.Name, len(li.Waiters), len(ml.queue))
		}
		for i, w := range li.Waiters {
			if mw := ml.queue[i]; w.Owner != mw.owner || w.Session != mw.session || w.Shared != mw.shared || w.Permits != mw.permits || w.Value != mw.value {
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
	for id, ms := range m.sessions {
		if s := f.st.sessions.get(id); s == nil || s.floor != ms.floor || len(s.results) != len(ms.results) {
			rt.Fatalf("session %d: %+v, model floor %d with %d results", id, s, ms.floor, len(ms.results))
		}
	}
	for _, s := range allSessionTTLs(f) {
		if ms := m.sessions[s.ID]; ms != nil && s.Origin != m.origin(ms) {
			rt.Fatalf("session %d: origin marker %d, model %d (renewed at %d, markers %v)", s.ID, s.Origin, m.origin(ms), ms.renewed, m.markers)
		}
	}
	if f.ClusterVersion() != m.version || f.ClusterID() != m.clusterID || f.Limits() != m.limits {
		rt.Fatalf("cluster version %d id %q limits %+v, model %d %q %+v", f.ClusterVersion(), f.ClusterID(), f.Limits(), m.version, m.clusterID, m.limits)
	}
}
