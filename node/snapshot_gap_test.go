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
	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/lockinfo"
	"github.com/raftlock/raftlock/internal/nodeopts"
	"github.com/raftlock/raftlock/internal/replica"
	"github.com/raftlock/raftlock/internal/storage"
	"github.com/raftlock/raftlock/internal/testing/clustertest"
	"github.com/raftlock/raftlock/internal/testing/memnet"
	"github.com/raftlock/raftlock/node"
)

// gapCluster is a 3-node in-memory cluster whose follower has installed the
// leader's snapshot (at index snapThreshold, the leader's last entry then)
// and applied 2 entries after it ("after-0", "after-1").
type gapCluster struct {
	c                *clustertest.Cluster
	diskFull         *[3]atomic.Bool
	l, f             int // leader, follower (the one that installed the snapshot)
	leader, follower *node.Node
	session          lockinfo.SessionID
	ctx              context.Context
}

const snapThreshold = 32

// startGapCluster builds the scenario (in a synctest bubble). Every link
// has a millisecond of latency: a replication loop that never backs off
// still takes fake time, so a livelock ends in a test's timeout instead of
// freezing the bubble's clock.
func startGapCluster(t *testing.T) *gapCluster {
	t.Helper()
	var diskFull [3]atomic.Bool
	net := memnet.New()
	c := clustertest.Start(t, clustertest.Options{Nodes: 3, Net: net, Configure: func(i int, cfg *node.Config) {
		cfg.SnapshotThreshold = snapThreshold
		cfg.TrailingLogs = 2
		cfg.SnapshotInterval = 100 * time.Millisecond
		nodeopts.Hooks(cfg).DiskFault = func(op storage.Op) error {
			if op == storage.OpAppend && diskFull[i].Load() {
				return fmt.Errorf("test: disk full: %w", syscall.ENOSPC)
			}
			return nil
		}
	}})
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
	g := &gapCluster{c: c, diskFull: &diskFull, l: l, f: f, leader: c.Nodes[l], follower: c.Nodes[f]}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	g.ctx = ctx
	g.session = openSession(t, ctx, g.leader, time.Hour)
	restored, err := replica.Of(g.follower).Subscribe(replica.EventFilter{Lock: "no such lock"}, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer restored.Close()

	// The follower misses enough entries that the leader snapshots and
	// compacts past it; back on the network it installs the snapshot. The
	// leader's log stops where its snapshot is due, so that the snapshot is
	// its last entry and no other is due in these tests.
	c.Isolate(f)
	for i := 0; g.leader.Status().LastIndex < snapThreshold; i++ {
		g.write(t, 1, fmt.Sprintf("cut-%d", i))
	}
	time.Sleep(time.Second) // SnapshotInterval: the leader snapshots
	c.Heal()
	select {
	case <-restored.Resync:
	case <-ctx.Done():
		t.Fatalf("the follower installed no snapshot: %s", c.Describe())
	}
	// It applies entries after the snapshot.
	g.write(t, 2, "after")
	if err := replica.Of(g.follower).WaitApplied(ctx, replica.Of(g.leader).AppliedIndex()); err != nil {
		t.Fatalf("before the disk fault: %v: %s", err, c.Describe())
	}
	return g
}

// write acquires n locks what-0 … what-(n−1) through the leader.
func (g *gapCluster) write(t *testing.T, n int, what string) {
	t.Helper()
	for i := range n {
		lock := fmt.Sprintf("%s-%d", what, i)
		if r, err := replica.Of(g.leader).Apply(g.ctx, fsm.Acquire{Session: g.session, Lock: lock, Owner: newOwner()}); err != nil || r.Status != fsmwire.StatusGranted {
			t.Fatalf("acquire %s: %v %+v", lock, err, r)
		}
	}
}

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
		g := startGapCluster(t)
		// Its disk is full while the others go on committing.
		g.diskFull[g.f].Store(true)
		g.write(t, 3, "full")
		time.Sleep(2 * time.Second) // the leader's retries fail, with backoff
		g.diskFull[g.f].Store(false)
		// Healed: it must catch up (well within 30 s; it never did).
		g.write(t, 1, "healed")
		want := replica.Of(g.leader).AppliedIndex()
		wctx, wcancel := context.WithTimeout(g.ctx, 30*time.Second)
		defer wcancel()
		if err := replica.Of(g.follower).WaitApplied(wctx, want); err != nil {
			t.Fatalf("the follower did not catch up to index %d after its disk healed: %v: %s", want, err, g.c.Describe())
		}
	})
}

// A follower never shows a state older than one it has shown: a read after
// Sync on it always sees the entries it had applied. hashicorp/raft v1.7.3
// installs whatever snapshot the leader sends, even one older than what the
// follower applied: a leader that walked back below the follower's log (its
// appends fail: disk full) sends its latest snapshot, here the one the
// follower installed before it applied "after-0" and "after-1". The other
// follower is cut off, so the leader commits nothing new: Sync on the
// follower waits for nothing, and the follower learns of no commit that
// would make it re-apply the entries after the old snapshot.
func TestFollowerNeverShowsAnOlderState(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := startGapCluster(t)
		shown := []string{"after-0", "after-1"}
		check := func(when string) {
			t.Helper()
			sctx, scancel := context.WithTimeout(g.ctx, 500*time.Millisecond)
			defer scancel()
			if err := g.follower.Sync(sctx); err != nil {
				return // no read allowed: nothing shown
			}
			for _, lock := range shown {
				if _, held := g.follower.Holder(lock); !held {
					t.Fatalf("%s: after Sync the follower (applied %d) shows %s free: the state before it applied it: %s",
						when, replica.Of(g.follower).AppliedIndex(), lock, g.c.Describe())
				}
			}
		}
		check("before the fault")

		other := 3 - g.l - g.f
		g.c.Isolate(other)
		g.diskFull[g.f].Store(true)
		// Entries the leader cannot commit: the follower rejects them (its
		// appends fail), and the leader walks back below its log.
		for i := range 4 {
			actx, acancel := context.WithTimeout(g.ctx, 100*time.Millisecond)
			_, _ = replica.Of(g.leader).Apply(actx, fsm.Acquire{Session: g.session, Lock: fmt.Sprintf("uncommitted-%d", i), Owner: newOwner()})
			acancel()
		}
		for i := range 30 {
			check(fmt.Sprintf("disk full, %d00 ms", i))
			time.Sleep(100 * time.Millisecond)
		}
		g.diskFull[g.f].Store(false)
		g.c.Heal()
		g.write(t, 1, "healed")
		shown = append(shown, "healed-0")
		wctx, wcancel := context.WithTimeout(g.ctx, 30*time.Second)
		defer wcancel()
		if err := replica.Of(g.follower).WaitApplied(wctx, replica.Of(g.leader).AppliedIndex()); err != nil {
			t.Fatalf("the follower did not catch up after the fault: %v: %s", err, g.c.Describe())
		}
		check("healed")
	})
}
