package lockapi

import (
	"context"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/leasetrace"
	"github.com/raftlock/raftlock/internal/nodeopts"
	"github.com/raftlock/raftlock/internal/testing/clustertest"
	"github.com/raftlock/raftlock/internal/testing/model/lease"
	"github.com/raftlock/raftlock/node"
)

// lapseAcrossLeaderChange records the lease trace (leasetrace.Recorder) of
// a 3-node cluster in which a holder with a lock-delay keeps its lock
// across a crash of the leader (the new leader takes over with its grace;
// the keepalives after it renew in Renewed entries),
// then its process pauses (keepalives stop) until its lease lapses on the
// client, which closes the lost session (the lapsed form); a waiter on
// another node is granted once the delay ended and unlocks. Every node's
// events are recorded from its start.
func lapseAcrossLeaderChange(t *testing.T) []leasetrace.Event {
	var rec leasetrace.Recorder
	var mu sync.Mutex
	var detach []func()
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for _, d := range detach {
			d()
		}
	}()
	c := startCluster(t, clustertest.Options{Started: func(i int, n *node.Node) {
		mu.Lock()
		defer mu.Unlock()
		detach = append(detach, rec.Attach(n, clustertest.ID(i)))
	}})
	c.WaitClusterVersion(fsm.MaxClusterVersion, 10*time.Second)
	ctx := context.Background()
	leader := c.WaitLeader(10 * time.Second)
	var followers []int
	for i := range c.Size() {
		if i != leader {
			followers = append(followers, i)
		}
	}
	const delay = 500 * time.Millisecond
	holder := newSession(t, c, followers[0], WithLockDelay(delay))
	waiter := newSession(t, c, followers[1])
	if _, err := holder.Lock(ctx, "job"); err != nil {
		t.Fatal(err)
	}
	granted := grantedAt(t, waiter, "job")
	synctest.Wait() // the waiter is queued

	c.Crash(leader)
	c.WaitLeader(10 * time.Second) // of the two left
	time.Sleep(2 * testTTL)        // keepalives renew through the new leader (Renewed entries)

	holder.pauseKeepalives(true) // the holder's process pauses
	if _, ok := <-granted; !ok {
		t.FailNow()
	}
	if err := waiter.Close(ctx); err != nil {
		t.Fatal(err)
	}
	synctest.Wait()
	return rec.Events()
}

// TestLeaseTraceConformsToTheModel checks a cluster run against the lease
// model (lease.Conform, trace validation): every step the leaders, the
// clients and the log took is one the model allows. The tampered traces
// show the check failing, with the step and the model's states, when the
// implementation steps outside the model: a client that believes its
// lease lasts a TTL longer than the model's window, and a lost client that
// closes its session in the plain form (which skips the lock-delay: the
// bug TestLapsedHolderKeepsItsLockDelay is there for).
func TestLeaseTraceConformsToTheModel(t *testing.T) {
	var trace []leasetrace.Event
	synctest.Test(t, func(t *testing.T) { trace = lapseAcrossLeaderChange(t) })
	if t.Failed() {
		return
	}
	cfg := lease.ConformConfig{TTL: testTTL, ElectionTimeout: nodeopts.TestTiming().ElectionTimeout}
	rep, err := lease.Conform(trace, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d events: %d sessions, %d replays, %d steps, stopped %v, %v", len(trace), rep.Sessions, rep.Replays, rep.Steps, rep.Unchecked, rep.Elapsed)
	for _, m := range rep.Mismatches {
		t.Errorf("mismatch: %s", m)
	}
	// Two sessions (holder and waiter), each alone and on "job".
	if rep.Sessions != 2 || rep.Replays != 4 || len(rep.Unchecked) != 0 {
		t.Errorf("followed %d sessions in %d replays (stopped %v); want 2 in 4, none stopped", rep.Sessions, rep.Replays, rep.Unchecked)
	}
	var lapsed, renewed bool
	for _, e := range trace {
		lapsed = lapsed || e.Kind == leasetrace.Lost && e.Verdict == leasetrace.LostDeadline
		renewed = renewed || e.Kind == leasetrace.ProposeRenewed
	}
	if !lapsed || !renewed {
		t.Fatalf("the run did not show what it is for: a lapse %v, a Renewed entry after the takeover %v", lapsed, renewed)
	}

	tampered := []struct {
		name, want string
		change     func(e *leasetrace.Event) bool // reports whether it changed e
	}{
		{"the client's window a TTL too long", "the client's keepalive succeeds", func(e *leasetrace.Event) bool {
			if e.Kind != leasetrace.KeepAliveResult || e.Verdict != "" {
				return false
			}
			e.Deadline += int64(testTTL)
			return true
		}},
		{"a lost client's plain close", "the client closes its session", func(e *leasetrace.Event) bool {
			if e.Kind != leasetrace.Command {
				return false
			}
			en, err := fsm.DecodeEntry(e.Data)
			if err != nil {
				t.Fatal(err)
			}
			c, ok := en.Commands[0].(fsm.CloseSession)
			if !ok || !c.Lapsed {
				return false
			}
			c.Lapsed = false
			en.Commands[0] = c
			if e.Data, err = fsm.EncodeEntry(en); err != nil {
				t.Fatal(err)
			}
			return true
		}},
	}
	for _, tc := range tampered {
		t.Run(tc.name, func(t *testing.T) {
			bad := append([]leasetrace.Event(nil), trace...)
			changed := false
			for i := range bad {
				if tc.change(&bad[i]) {
					changed = true
					break
				}
			}
			if !changed {
				t.Fatal("nothing in the trace to change")
			}
			rep, err := lease.Conform(bad, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Mismatches) == 0 {
				t.Fatal("no mismatch found")
			}
			if got := rep.Mismatches[0].String(); !strings.Contains(got, tc.want) {
				t.Errorf("mismatch %q does not name the step %q", got, tc.want)
			} else {
				t.Logf("found: %s", got)
			}
		})
	}
}
