package node_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/clustertest"
	"github.com/raftlock/raftlock/internal/memnet"
	"github.com/raftlock/raftlock/node"
)

// A follower that installed the leader's snapshot and appended entries after
// it must catch up again once its failing disk heals (chaos disk seed 95).
//
// Its log holds no entry at the snapshot's index K, only entries after it.
// While its disk is full every append fails, and the leader walks its
// nextIndex back below K+1. hashicorp/raft v1.7.3 then looks the previous
// entry K up in the log (it is the snapshot's last entry, not the log's),
// rejects, walks further back, and sends the same snapshot again: a livelock
// that only a new leader or a newer leader snapshot ends.
func TestFollowerCatchesUpAfterSnapshotThenDiskFull(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const threshold = 32
		var diskFull [3]atomic.Bool
		net := memnet.New()
		c := clustertest.Start(t, clustertest.Options{Nodes: 3, Net: net, Configure: func(i int, cfg *node.Config) {
			cfg.SnapshotThreshold = threshold
			cfg.TrailingLogs = 2
			cfg.SnapshotInterval = 100 * time.Millisecond
			cfg.DiskFault = func(op node.DiskOp) error {
				if op == node.DiskAppend && diskFull[i].Load() {
					return fmt.Errorf("test: disk full: %w", syscall.ENOSPC)
				}
				return nil
			}
		}})
		// A millisecond of latency on every link: a replication loop that
		// never backs off still takes fake time, so a livelock ends in the
		// timeout below instead of freezing the bubble's clock.
		for a := range 3 {
			for b := range 3 {
				if a != b {
					net.SetDelay(c.RaftHost(a), c.RaftHost(b), time.Millisecond)
				}
			}
		}
		l := c.WaitLeader(10 * time.Second)
		c.WaitReady(10 * time.Second)
		f := c.Follower(l)
		leader, follower := c.Nodes[l], c.Nodes[f]
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		s := openSession(t, ctx, leader, time.Hour)
		write := func(n int, what string) {
			t.Helper()
			for i := range n {
				lock := fmt.Sprintf("%s-%d", what, i)
				if r, err := leader.Apply(ctx, fsm.Acquire{Session: s, Lock: lock, Owner: newOwner()}); err != nil || r.Status != fsm.StatusGranted {
					t.Fatalf("acquire %s: %v %+v", lock, err, r)
				}
			}
		}
		restored, err := follower.Subscribe(node.EventFilter{Lock: "no such lock"}, 1)
		if err != nil {
			t.Fatal(err)
		}
		defer restored.Close()

		// 1. The follower misses enough entries that the leader snapshots and
		// compacts past it; back on the network it installs the snapshot.
		// The leader's log stops where its snapshot is due, so that the
		// snapshot is its last entry and no other is due in this test.
		c.Isolate(f)
		for i := 0; leader.Status().LastIndex < threshold; i++ {
			write(1, fmt.Sprintf("cut-%d", i))
		}
		time.Sleep(time.Second) // SnapshotInterval: the leader snapshots
		c.Heal()
		select {
		case <-restored.Resync:
		case <-ctx.Done():
			t.Fatalf("the follower installed no snapshot: %s", c.Describe())
		}
		// 2. It appends entries after the snapshot.
		write(2, "after")
		if err := follower.WaitApplied(ctx, leader.AppliedIndex()); err != nil {
			t.Fatalf("before the disk fault: %v: %s", err, c.Describe())
		}
		// 3. Its disk is full while the others go on committing.
		diskFull[f].Store(true)
		write(3, "full")
		time.Sleep(2 * time.Second) // the leader's retries fail, with backoff
		diskFull[f].Store(false)
		// 4. Healed: it must catch up (well within 30 s; it never did).
		write(1, "healed")
		want := leader.AppliedIndex()
		wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
		defer wcancel()
		if err := follower.WaitApplied(wctx, want); err != nil {
			t.Fatalf("the follower did not catch up to index %d after its disk healed: %v: %s", want, err, c.Describe())
		}
	})
}
