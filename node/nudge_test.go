package node

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raftlock/raftlock/fsm"
)

func testNudger(t *testing.T) (*nudger, *atomic.Int32) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	var submitted atomic.Int32
	u := &nudger{h: nudgerHost{
		ctx: ctx, wg: &sync.WaitGroup{},
		committed: func() uint64 { return 0 },
		call:      func(context.Context, []byte) error { return nil },
		submit:    func(fsm.Command) { submitted.Add(1) },
	}}
	return u, &submitted
}

// A flush timer whose callback already waits for the lock while a Noop
// makes the flush unneeded (and another entry commits) must not touch the
// stopped timer: before, it called Reset on a nil timer — a panic in a
// timer goroutine, which ends the process (a bench replica died so).
func TestFlushStoppedWhileItsCallbackWaits(t *testing.T) {
	u, submitted := testNudger(t)
	u.committed(5) // arms the flush
	u.mu.Lock()
	time.Sleep(10 * flushDelay) // the callback fires and waits for the lock
	u.entries++                 // an entry committed (index 7)…
	u.last = 7
	u.committedNoopsLocked(8) // …and a Noop after it: no flush needed
	u.mu.Unlock()
	time.Sleep(10 * flushDelay) // the callback runs
	if n := submitted.Load(); n != 0 {
		t.Fatalf("%d flush Noops after the flush was made unneeded", n)
	}
}

// The flush: one Noop once the log is quiet, none while entries keep
// coming (the timer re-arms), none after a Noop that covered them. (Fake
// time: the plan, not the machine.)
func TestFlushPlan(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u, submitted := testNudger(t)
		u.committed(1)
		for i := range 5 { // entries more often than flushDelay
			time.Sleep(flushDelay / 3)
			u.committed(uint64(2 + i))
		}
		synctest.Wait()
		if n := submitted.Load(); n != 0 {
			t.Fatalf("flushed while entries kept coming (%d)", n)
		}
		time.Sleep(2 * flushDelay)
		synctest.Wait()
		if n := submitted.Load(); n != 1 {
			t.Fatalf("%d flush Noops once quiet, want 1", n)
		}
		u.committedNoops(7) // the flush's own Noop
		time.Sleep(10 * flushDelay)
		synctest.Wait()
		if n := submitted.Load(); n != 1 {
			t.Fatalf("a Noop was followed by a flush (%d Noops)", n)
		}
		u.committed(8)
		u.committedNoops(9) // a nudge's Noop covers entry 8
		time.Sleep(10 * flushDelay)
		synctest.Wait()
		if n := submitted.Load(); n != 1 {
			t.Fatalf("flushed after a Noop that covered the entry (%d Noops)", n)
		}
	})
}
