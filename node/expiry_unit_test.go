package node

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashicorp/raft"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/lockinfo"
	"github.com/raftlock/raftlock/internal/replica"
)

// A bare state machine and a proposer that applies commands to it at once
// stand in for Raft: the expiry manager's decisions (deadlines, expiries,
// lock-delay ends, the takeover grace) run on fake time, on their own.

type expiryRig struct {
	t         *testing.T
	m         *expiryManager
	f         *fsm.FSM
	times     applyTimes
	mu        sync.Mutex
	index     uint64
	wall      atomic.Int64 // wall clock offset of the "leader"
	expiredAt atomic.Int64 // when a session expiry was last applied
	cmds      []fsm.Command
}

type rigObserver struct{ r *expiryRig }

func (o rigObserver) Applied(_ uint64, events []fsm.Event) {
	for _, e := range events {
		if e.Kind == fsmwire.EventSessionExpired {
			o.r.expiredAt.Store(time.Now().UnixNano())
		}
	}
	o.r.times.observe(events, time.Now(), o.r.f.DelayedLocks)
	if m := o.r.m; m != nil {
		m.observe(events)
	}
}
func (o rigObserver) Restored(uint64) { o.r.times.restored(time.Now()) }

func newExpiryRig(t *testing.T) *expiryRig {
	r := &expiryRig{t: t}
	r.f = fsm.New(rigObserver{r})
	r.m = newExpiryManager(expiryHost{
		fsm:        r.f,
		times:      &r.times,
		propose:    r.propose,
		confirm:    func(context.Context, time.Duration) error { return nil },
		duties:     func(context.Context) {},
		wallNow:    func() time.Time { return time.Now().Add(time.Duration(r.wall.Load())) },
		expired:    func(int) {},
		delayEnded: func(bool) {},
		log:        slog.New(slog.DiscardHandler),
		grace:      time.Second,
		heartbeat:  100 * time.Millisecond,
		retry:      time.Second,
	})
	r.propose(context.Background(), fsm.SetClusterVersion{Version: fsm.MaxClusterVersion})
	return r
}

func (r *expiryRig) propose(_ context.Context, cmd fsm.Command) outcome {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.index++
	r.cmds = append(r.cmds, cmd)
	data, err := fsm.EncodeEntry(fsm.Entry{At: time.Now().Add(time.Duration(r.wall.Load())).UnixNano(), Commands: []fsm.Command{cmd}})
	if err != nil {
		r.t.Fatal(err)
	}
	resp := r.f.Apply(&raft.Log{Type: raft.LogCommand, Index: r.index, Data: data}).(*fsm.Response)
	if resp.Err != nil {
		return outcome{err: resp.Err}
	}
	return outcome{res: &resp.Results[0], index: r.index}
}

func (r *expiryRig) mustApply(cmd fsm.Command) fsm.Result {
	r.t.Helper()
	out := r.propose(context.Background(), cmd)
	if out.err != nil {
		r.t.Fatal(out.err)
	}
	return out.result()
}

// lead runs the manager as leader until the test's cleanup.
func (r *expiryRig) lead() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.m.lead(ctx) }()
	r.t.Cleanup(func() { cancel(); <-done })
	for !r.m.isLeading() {
		time.Sleep(time.Millisecond)
	}
}

func (r *expiryRig) alive(id lockinfo.SessionID) bool {
	_, ok := r.f.Session(id)
	return ok
}

// A session lives while keepalives come, gets the takeover grace from a new
// leader, and is expired at its deadline once they stop; a keepalive after
// the deadline is refused even before the expiry is applied.
func TestExpiryDeadlinesOnFakeTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newExpiryRig(t)
		s := r.mustApply(fsm.OpenSession{TTL: time.Second}).Session
		r.lead() // takeover: deadline = now + TTL + grace (2 s)
		start := time.Now()
		for range 5 {
			time.Sleep(900 * time.Millisecond)
			if err := r.m.keepAlive(context.Background(), s); err != nil {
				t.Fatalf("keepalive at %v: %v", time.Since(start), err)
			}
		}
		renewed := time.Now()
		time.Sleep(999 * time.Millisecond)
		synctest.Wait()
		if !r.alive(s) {
			t.Fatal("expired before its deadline")
		}
		time.Sleep(2 * time.Millisecond)
		synctest.Wait()
		if r.alive(s) {
			t.Fatalf("alive %v after its last keepalive (TTL 1s)", time.Since(renewed))
		}
		if err := r.m.keepAlive(context.Background(), s); !errors.Is(err, replica.ErrSessionExpired) {
			t.Fatalf("keepalive after expiry: %v", err)
		}
	})
}

// A new leader gives every session the takeover grace (TTL + election
// timeout), so a keepalive acknowledged by the old leader is not cut short.
func TestExpiryTakeoverGrace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newExpiryRig(t)
		s := r.mustApply(fsm.OpenSession{TTL: time.Second}).Session
		time.Sleep(5 * time.Second) // no leader meanwhile: nobody expires it
		r.lead()
		time.Sleep(1900 * time.Millisecond)
		synctest.Wait()
		if !r.alive(s) {
			t.Fatal("expired within the takeover grace")
		}
		time.Sleep(200 * time.Millisecond)
		synctest.Wait()
		if r.alive(s) {
			t.Fatal("not expired after TTL + grace")
		}
	})
}

// A lock-delay is timed on the leader's monotonic clock: a wall clock a day
// ahead (or an hour back) neither ends it early nor keeps it late.
func TestExpiryLockDelayOnMonotonicClock(t *testing.T) {
	for _, jump := range []time.Duration{24 * time.Hour, -time.Hour} {
		t.Run(jump.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newExpiryRig(t)
				r.lead()
				holder := r.mustApply(fsm.OpenSession{TTL: time.Second, LockDelay: 3 * time.Second}).Session
				waiter := r.mustApply(fsm.OpenSession{TTL: time.Hour}).Session
				r.mustApply(fsm.Acquire{Session: holder, Lock: "x", Owner: lockinfo.OwnerID{1}, Seq: 1})
				r.mustApply(fsm.Acquire{Session: waiter, Lock: "x", Owner: lockinfo.OwnerID{2}, Wait: true, Seq: 1})
				r.wall.Store(int64(jump))
				for !func() bool { _, ok := r.f.Session(holder); return !ok }() {
					time.Sleep(10 * time.Millisecond)
					r.m.keepAlive(context.Background(), waiter)
				}
				expired := time.Unix(0, r.expiredAt.Load())
				for {
					if h, ok := r.f.Holder("x"); ok && h.Session == waiter {
						break
					}
					if time.Since(expired) > 10*time.Second {
						t.Fatal("the delayed lock was never granted")
					}
					time.Sleep(10 * time.Millisecond)
					r.m.keepAlive(context.Background(), waiter)
				}
				if took := time.Since(expired); took < 3*time.Second || took > 3*time.Second+100*time.Millisecond {
					t.Fatalf("granted %v after the expiry, lock-delay 3s", took)
				}
			})
		})
	}
}
