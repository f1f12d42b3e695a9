package node_test

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/replica"
)

// Renewals in the log are cluster version 4: below it (a server of the
// previous release may vote) a new leader's barrier is a Tick, no marker is
// applied and keepalives write nothing, as before. Once the version is 4,
// the first keepalive of a session after a leader change writes one small
// entry (Renewed); the keepalives that follow, none.
func TestRenewalsWaitForClusterVersion4(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var oldMax atomic.Uint64
		oldMax.Store(3)
		c := startWithOldServer(t, &oldMax)
		ch := &churn{t: t, c: c}
		var markers atomic.Int64
		for _, n := range c.Nodes {
			sub, err := replica.Of(n).Subscribe(replica.EventFilter{All: true}, 1024)
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan struct{})
			go func() {
				for {
					select {
					case e := <-sub.C:
						if e.Kind == fsmwire.EventMarker {
							markers.Add(1)
						}
					case <-done:
						return
					}
				}
			}()
			defer func() { close(done); sub.Close() }()
		}
		ctx := context.Background()
		s := openSession(t, ctx, c.Nodes[c.WaitLeader(time.Second)], time.Minute)

		// written returns how many entries two keepalives of s wrote on the
		// leader: the first's and the second's.
		written := func() (first, second uint64) {
			t.Helper()
			l := c.Nodes[ch.leading()]
			time.Sleep(time.Second) // what the new leader writes on its own is written
			for i := range 2 {
				before := replica.Of(l).AppliedIndex()
				if err := replica.Of(l).KeepAlive(ctx, s); err != nil {
					t.Fatal(err)
				}
				time.Sleep(100 * time.Millisecond)
				if n := replica.Of(l).AppliedIndex() - before; i == 0 {
					first = n
				} else {
					second = n
				}
			}
			return first, second
		}

		ch.change()
		if first, second := written(); first != 0 || second != 0 || markers.Load() != 0 {
			t.Fatalf("cluster version 3: keepalives after a leader change wrote %d and %d entries, %d markers applied", first, second, markers.Load())
		}
		oldMax.Store(0) // upgraded
		waitClusterVersion(t, c, fsm.MaxClusterVersion)
		ch.change()
		// The new leader's marker is applied by each replica in its own time
		// (a follower learns the commit with the next append).
		for deadline := time.Now().Add(time.Second); markers.Load() < int64(len(c.Nodes)) && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
		}
		if n := markers.Load(); n != int64(len(c.Nodes)) {
			t.Fatalf("after a leader change at version 4: %d markers applied, want one per replica", n)
		}
		if first, second := written(); first != 1 || second != 0 {
			t.Fatalf("cluster version 4: keepalives after a leader change wrote %d and %d entries, want 1 (Renewed) then none", first, second)
		}
	})
}
