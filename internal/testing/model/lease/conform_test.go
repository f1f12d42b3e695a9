package lease

import (
	"strings"
	"testing"
	"time"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/leasetrace"
	"github.com/raftlock/raftlock/internal/lockinfo"
)

// traceBuilder writes a run's trace by hand: one leader n1 (term 1), its
// log from index 1, and the events of the session the test follows.
type traceBuilder struct {
	t      *testing.T
	events []leasetrace.Event
	index  uint64
}

// conformTTL and conformET are the run's TTL and election timeout: a tick
// of 50 ms, the chaos harness's.
const (
	conformTTL = time.Second
	conformET  = 50 * time.Millisecond
	conformT0  = int64(1000 * time.Second) // the trace's first instant (a tick's start)
)

// at is the instant ms milliseconds after the trace's start.
func at(ms int64) int64 { return conformT0 + ms*int64(time.Millisecond) }

func (b *traceBuilder) add(e leasetrace.Event) { b.events = append(b.events, e) }

// apply appends command c to the log, first applied (on n1) at ms.
func (b *traceBuilder) apply(ms int64, c fsm.Command) {
	b.t.Helper()
	data, err := fsm.EncodeEntry(fsm.Entry{At: at(ms), Commands: []fsm.Command{c}})
	if err != nil {
		b.t.Fatal(err)
	}
	b.index++
	b.add(leasetrace.Event{At: at(ms), Node: "n1", Kind: leasetrace.Applied, Term: 1, Index: b.index, Data: data})
}

// command reports the client's command c (sent at ms) and applies it.
func (b *traceBuilder) command(ms int64, s lockinfo.SessionID, c fsm.Command) {
	b.t.Helper()
	data, err := fsm.EncodeEntry(fsm.Entry{At: at(ms), Commands: []fsm.Command{c}})
	if err != nil {
		b.t.Fatal(err)
	}
	b.add(leasetrace.Event{At: at(ms), Node: "n1", Kind: leasetrace.Command, Session: uint64(s), Data: data})
	b.apply(ms, c)
}

// keepAlive reports a keepalive of s sent at ms, confirmed by the leader
// and answered 2 ms later.
func (b *traceBuilder) keepAlive(ms int64, s lockinfo.SessionID) {
	margin := int64(conformTTL / ticksPerTTL)
	b.add(leasetrace.Event{At: at(ms), Node: "n1", Kind: leasetrace.KeepAliveSent, Session: uint64(s)})
	b.add(leasetrace.Event{At: at(ms + 1), Node: "n1", Kind: leasetrace.KeepAliveReceived, Session: uint64(s), Verdict: leasetrace.VerdictConfirm})
	b.add(leasetrace.Event{At: at(ms + 2), Node: "n1", Kind: leasetrace.KeepAliveAnswered, Session: uint64(s), Sent: at(ms + 1), Deadline: at(ms+1) + int64(conformTTL)})
	b.add(leasetrace.Event{At: at(ms + 2), Node: "n1", Kind: leasetrace.KeepAliveResult, Session: uint64(s), Sent: at(ms), Deadline: at(ms) + int64(conformTTL) - margin})
}

// grantAtWindowEdge is the run of the amnesia class's seeds 7004 and 7006:
// a session's OpenSession waits for a leader almost a whole window (sent
// at sentMs, committed at openMs), so that its client's window (sent +
// TTL − margin) ends within the tick of the commit; in that tick, before
// the window's end, the client asks for a free lock and is granted, and
// its first keepalive renews the window. It then holds the lock and
// releases it in the plain form.
func grantAtWindowEdge(t *testing.T, sentMs, openMs int64) []leasetrace.Event {
	b := &traceBuilder{t: t}
	const s = lockinfo.SessionID(1) // the state machine's first session
	margin := int64(conformTTL / ticksPerTTL)
	b.add(leasetrace.Event{At: at(0), Node: "n1", Kind: leasetrace.Lead, Term: 1})
	b.apply(1, fsm.Tick{})
	b.add(leasetrace.Event{At: at(1), Node: "n1", Kind: leasetrace.Install})
	b.add(leasetrace.Event{At: at(openMs), Node: "n1", Kind: leasetrace.Opened, Session: uint64(s), Sent: at(sentMs), Deadline: at(sentMs) + int64(conformTTL) - margin})
	b.apply(openMs, fsm.OpenSession{TTL: conformTTL, LockDelay: 150 * time.Millisecond})
	b.add(leasetrace.Event{At: at(openMs), Node: "n1", Kind: leasetrace.DeadlineSet, Session: uint64(s), Deadline: at(openMs) + int64(conformTTL)})
	owner := lockinfo.OwnerID{1}
	b.command(openMs+1, s, fsm.Acquire{Session: s, Lock: "L", Owner: owner, Wait: true, Seq: 1, AckBelow: 1})
	b.keepAlive(openMs+3, s)
	b.command(openMs+200, s, fsm.Release{Session: s, Lock: "L", Owner: owner, Seq: 2, AckBelow: 2})
	return b.events
}

// TestConformGrantAtTheWindowsEdge: a grant within the tick in which the
// client's window ends, before it ends, opens the client's hold (Bounds.
// Edges: the client is valid until it lapses within that tick), so its
// later plain release is allowed. The model used to open the hold only for
// a window of at least a tick and found "the client releases the lock:
// the model's client may not do that now" (amnesia seeds 7004 and 7006).
// A window that ended a tick before the commit is still a mismatch: the
// client is lost and may not send a keepalive.
func TestConformGrantAtTheWindowsEdge(t *testing.T) {
	cases := []struct {
		name           string
		sentMs, openMs int64
		want           string // the mismatch's step ("" none)
	}{
		// Sent at 60 ms (tick 1): the window ends at 1010 ms, in tick 20,
		// the tick of the commit at 1000 ms: the grant at 1002 ms is in it.
		{"granted at the window's edge", 60, 1000, ""},
		// Sent at 10 ms: the window ended at 960 ms, in tick 19, before
		// the commit's tick.
		{"opened after the window ended", 10, 1000, "the client sends a keepalive"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rep, err := Conform(grantAtWindowEdge(t, tc.sentMs, tc.openMs), ConformConfig{TTL: conformTTL, ElectionTimeout: conformET})
			if err != nil {
				t.Fatal(err)
			}
			if rep.Sessions != 1 || rep.Replays != 2 {
				t.Fatalf("followed %d sessions in %d replays; want 1 in 2", rep.Sessions, rep.Replays)
			}
			if tc.want == "" {
				if len(rep.Unchecked) != 0 {
					t.Errorf("replays stopped: %v", rep.Unchecked)
				}
				for _, m := range rep.Mismatches {
					t.Errorf("mismatch: %s", m)
				}
				return
			}
			if len(rep.Mismatches) == 0 {
				t.Fatalf("no mismatch; want one at %q", tc.want)
			}
			if got := rep.Mismatches[0].String(); !strings.Contains(got, tc.want) {
				t.Fatalf("mismatch %q; want one at %q", got, tc.want)
			}
		})
	}
}
