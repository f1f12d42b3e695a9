package node

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

type askCounts struct{ calls, snapshots, logged atomic.Int32 }

// testAsker runs in a synctest bubble: now is the bubble's clock.
func testAsker(t *testing.T, applied uint64, callErr error) (*snapshotAsker, *askCounts, *sync.WaitGroup) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	var c askCounts
	wg := &sync.WaitGroup{}
	a := &snapshotAsker{h: snapshotAskHost{
		ctx: ctx, wg: wg, now: time.Now,
		call: func(_ context.Context, req []byte) error {
			if i, err := decodeSnapshotAsk(req); err != nil || i != 36 {
				t.Errorf("ask %x: index %d, %v; want 36", req, i, err)
			}
			c.calls.Add(1)
			return callErr
		},
		applied:  func() uint64 { return applied },
		snapshot: func() error { c.snapshots.Add(1); return nil },
		log:      func(string, uint64, uint64, error) { c.logged.Add(1) },
	}}
	return a, &c, wg
}

// A follower that refuses older snapshots asks at once, then at most once
// per snapshotAskEvery however often the leader sends them; a leader of
// the previous release (the unknown kind is an error) changes nothing.
func TestSnapshotAskFollowerRateLimit(t *testing.T) {
	for _, callErr := range []error{nil, errors.New("node: unknown request kind 7")} {
		synctest.Test(t, func(t *testing.T) {
			a, c, wg := testAsker(t, 36, callErr)
			for range 50 { // a refusal every 10 ms for 500 ms
				a.refused(33, 36)
				time.Sleep(10 * time.Millisecond)
			}
			wg.Wait()
			if n := c.calls.Load(); n != 1 {
				t.Fatalf("%d asks in 500 ms (call error %v), want 1", n, callErr)
			}
			time.Sleep(snapshotAskEvery)
			a.refused(33, 36)
			wg.Wait()
			if n := c.calls.Load(); n != 2 {
				t.Fatalf("%d asks after snapshotAskEvery, want 2", n)
			}
		})
	}
}

// A leader takes a snapshot for an ask only once it has applied the index
// asked for (an older one would be refused too), at most once per
// snapshotAskEvery, and none after its node closed.
func TestSnapshotAskLeaderPlan(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, c, wg := testAsker(t, 35, nil)
		a.asked(36)
		wg.Wait()
		if n := c.snapshots.Load(); n != 0 {
			t.Fatalf("snapshot taken at applied 35 for an ask of 36")
		}
		a.asked(35)
		a.asked(35)
		wg.Wait()
		if n := c.snapshots.Load(); n != 1 {
			t.Fatalf("%d snapshots for two asks at once, want 1", n)
		}
		time.Sleep(snapshotAskEvery)
		a.asked(34)
		wg.Wait()
		if n := c.snapshots.Load(); n != 2 {
			t.Fatalf("%d snapshots after snapshotAskEvery, want 2", n)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		a, c, wg := testAsker(t, 36, nil)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		a.h.ctx = ctx
		a.asked(36)
		a.refused(33, 36)
		wg.Wait()
		if c.snapshots.Load()+c.calls.Load() != 0 {
			t.Fatal("a closed node asked or snapshotted")
		}
	})
}
