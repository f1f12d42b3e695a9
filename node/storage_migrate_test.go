//go:build raftwal

package node_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/replica"
	"github.com/raftlock/raftlock/internal/testing/clustertest"
	"github.com/raftlock/raftlock/internal/testing/memnet"
	"github.com/raftlock/raftlock/node"
)

// A cluster on bolt is migrated to the WAL, one stopped node at a time (a
// rolling migration), and back again: every node keeps its identity (the
// same Raft id, incarnation and cluster id: it is the same member), the
// state is intact, and the cluster serves after every step.
func TestMigrateLogStoreRolling(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := clustertest.Start(t, clustertest.Options{Nodes: 3, Net: memnet.New(), Durable: true})
		c.WaitLeader(10 * time.Second)
		c.WaitReady(10 * time.Second)
		ctx := context.Background()
		s := openSession(t, ctx, c.Nodes[0], 24*time.Hour)
		var held []string
		grant := func(through int) {
			t.Helper()
			name := fmt.Sprintf("l%d", len(held))
			if r, err := replica.Of(c.Nodes[through]).Apply(ctx, fsm.Acquire{Session: s, Lock: name, Owner: newOwner()}); err != nil || r.Status != fsmwire.StatusGranted {
				t.Fatalf("acquire %s through %s: %v %+v", name, c.ID(through), err, r)
			}
			held = append(held, name)
		}
		grant(0)
		ids := make([]node.Status, 3)
		for i, n := range c.Nodes {
			ids[i] = n.Status()
		}
		for _, step := range []struct{ from, to node.LogStore }{
			{node.LogStoreBolt, node.LogStoreWAL}, {node.LogStoreWAL, node.LogStoreBolt},
		} {
			for i := range 3 {
				c.Stop(i)
				if err := node.MigrateLogStore(ctx, c.DataDir(i), step.from, step.to); err != nil {
					t.Fatalf("migrate %s %s→%s: %v", c.ID(i), step.from, step.to, err)
				}
				// The old kind is refused now.
				c.Reconfigure(i, func(cfg *node.Config) { cfg.LogStore = step.from })
				if err := c.TryLaunch(i); !errors.Is(err, node.ErrInvalidConfig) || !strings.Contains(err.Error(), "MigrateLogStore") {
					t.Fatalf("%s started with the old log store: %v", c.ID(i), err)
				}
				c.Reconfigure(i, func(cfg *node.Config) { cfg.LogStore = step.to })
				c.Restart(i)
				c.WaitReady(20 * time.Second)
				st := c.Nodes[i].Status()
				if st.RaftID != ids[i].RaftID || st.Incarnation != ids[i].Incarnation || st.ClusterID != ids[i].ClusterID {
					t.Fatalf("%s after migrating to %s: identity %s/%s/%s, was %s/%s/%s", c.ID(i), step.to,
						st.RaftID, st.Incarnation, st.ClusterID, ids[i].RaftID, ids[i].Incarnation, ids[i].ClusterID)
				}
				if err := c.Nodes[i].Sync(ctx); err != nil {
					t.Fatal(err)
				}
				for _, name := range held {
					if _, ok := c.Nodes[i].Holder(name); !ok {
						t.Fatalf("%s after migrating to %s: lock %s lost", c.ID(i), step.to, name)
					}
				}
				grant(i)
			}
		}
		if got := len(c.Nodes[0].Status().Servers); got != 3 {
			t.Fatalf("%d servers after the migrations, want the same 3", got)
		}
	})
}

// The migration's edges: a running node's store is refused (locked); a dir
// without the source kind is refused; a half-written copy of an earlier
// attempt is discarded; a dir left with both stores (a crash after the
// rename) is finished; a migrated dir migrates again as a no-op.
func TestMigrateLogStoreEdges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := clustertest.Start(t, clustertest.Options{Nodes: 3, Net: memnet.New(), Durable: true})
		c.WaitLeader(10 * time.Second)
		c.WaitReady(10 * time.Second)
		ctx := context.Background()
		dir := c.DataDir(1)
		if err := node.MigrateLogStore(ctx, dir, node.LogStoreBolt, node.LogStoreWAL); err == nil || !strings.Contains(err.Error(), "locked") {
			t.Fatalf("migrating a running node's store: %v", err)
		}
		c.Stop(1)
		for _, bad := range [][2]node.LogStore{{"bolt", "bolt"}, {"bolt", "sqlite"}} {
			if err := node.MigrateLogStore(ctx, dir, bad[0], bad[1]); !errors.Is(err, node.ErrInvalidConfig) {
				t.Fatalf("migrate %s→%s: %v, want ErrInvalidConfig", bad[0], bad[1], err)
			}
		}
		if err := node.MigrateLogStore(ctx, t.TempDir(), node.LogStoreBolt, node.LogStoreWAL); !errors.Is(err, node.ErrInvalidConfig) {
			t.Fatalf("migrating a dir without a store: %v, want ErrInvalidConfig", err)
		}
		if err := node.MigrateLogStore(ctx, dir, node.LogStoreWAL, node.LogStoreBolt); err != nil {
			t.Fatalf("migrating to the kind the dir holds: %v, want a no-op", err)
		}
		// An earlier attempt crashed while copying.
		junk := filepath.Join(dir, "wal.migrating")
		if err := os.MkdirAll(junk, 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(junk, "wal-meta.db"), []byte("half"), 0o640); err != nil {
			t.Fatal(err)
		}
		if err := node.MigrateLogStore(ctx, dir, node.LogStoreBolt, node.LogStoreWAL); err != nil {
			t.Fatalf("migrate over a half-written copy: %v", err)
		}
		if _, err := os.Stat(filepath.Join(dir, "raft.db")); !os.IsNotExist(err) {
			t.Fatalf("bolt store left after the migration: %v", err)
		}
		if err := node.MigrateLogStore(ctx, dir, node.LogStoreBolt, node.LogStoreWAL); err != nil {
			t.Fatalf("migrating a migrated dir: %v", err)
		}
		// A crash after the rename, before the old store was removed.
		if err := os.WriteFile(filepath.Join(dir, "raft.db"), []byte("old"), 0o640); err != nil {
			t.Fatal(err)
		}
		c.Reconfigure(1, func(cfg *node.Config) { cfg.LogStore = node.LogStoreWAL })
		if err := c.TryLaunch(1); !errors.Is(err, node.ErrInvalidConfig) {
			t.Fatalf("started on a dir with both stores: %v", err)
		}
		if err := node.MigrateLogStore(ctx, dir, node.LogStoreBolt, node.LogStoreWAL); err != nil {
			t.Fatalf("finishing a migration: %v", err)
		}
		c.Restart(1)
		c.WaitReady(20 * time.Second)
	})
}

// A decommissioned data dir stays decommissioned through a migration:
// MigrateLogStore copies the mark Leave leaves (it used to copy only the
// identity keys, so the migrated node started again, idle outside its own
// configuration).
func TestMigratedLeftDataDirRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := clustertest.Start(t, clustertest.Options{Nodes: 3, Net: memnet.New(), Durable: true})
		c.WaitLeader(20 * time.Second)
		c.WaitReady(20 * time.Second)
		c.Leave(2)
		if err := node.MigrateLogStore(context.Background(), c.DataDir(2), node.LogStoreBolt, node.LogStoreWAL); err != nil {
			t.Fatalf("migrate the left node's data dir: %v", err)
		}
		c.Reconfigure(2, func(cfg *node.Config) { cfg.LogStore = node.LogStoreWAL })
		if err := c.TryLaunch(2); !errors.Is(err, node.ErrDecommissioned) {
			t.Fatalf("start on the migrated data dir of a node that left: %v, want ErrDecommissioned", err)
		}
	})
}
