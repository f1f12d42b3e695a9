package limits

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	wal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/metadb"
	"go.etcd.io/bbolt"

	"github.com/raftlock/raftlock/node"

	"github.com/raftlock/raftlock/bench/internal/report"
	"github.com/raftlock/raftlock/bench/internal/stats"
)

// The bare cluster is configured like raftlock's node package: LAN timing
// (node.LANTiming, but a 5 ms commit tick: nothing here nudges a follower),
// the same raft-boltdb options (fsync on every commit) and log cache. It is
// the ceiling of one Apply per request, without batching.
const (
	commitTimeout = 5 * time.Millisecond
	logCacheSize  = 512
)

// bareTiming is node.LANTiming with the bare cluster's commit tick.
func bareTiming() Timing {
	t := node.LANTiming()
	return Timing{Heartbeat: t.HeartbeatTimeout, Election: t.ElectionTimeout, LeaderLease: t.LeaderLeaseTimeout, Commit: commitTimeout}
}

// command is a payload of the size of a lock command.
var command = make([]byte, 64)

// Log stores of the bare cluster: raftlock's two (node.LogStoreBolt,
// node.LogStoreWAL).
const (
	StoreBolt = "bolt"
	StoreWAL  = "wal"
)

// BareRaft starts a 3-node hashicorp/raft cluster in this process over
// loopback TCP with its stores (StoreBolt or StoreWAL) under dir and
// measures the commit rate with each number of concurrent appliers (one
// Apply in flight each) for d.
func BareRaft(ctx context.Context, dir, store string, appliers []int, d time.Duration) ([]report.RaftLimit, error) {
	c, err := startRaft(ctx, dir, store, 3)
	if err != nil {
		return nil, err
	}
	defer c.shutdown()
	var out []report.RaftLimit
	for _, n := range appliers {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		leader, err := c.leader(ctx)
		if err != nil {
			return out, err
		}
		l := measureApply(leader, n, d)
		l.Store = store
		out = append(out, l)
	}
	return out, nil
}

// measureApply runs n appliers against the leader for d.
func measureApply(r *raft.Raft, n int, d time.Duration) report.RaftLimit {
	all, elapsed := closedLoop(n, d, func() bool {
		if err := r.Apply(command, 5*time.Second).Error(); err != nil {
			time.Sleep(time.Millisecond)
			return false
		}
		return true
	})
	return report.RaftLimit{
		Appliers:      n,
		CommitsPerSec: float64(len(all)) / elapsed.Seconds(),
		Latency:       stats.Summarize(all),
	}
}

// closedLoop runs n workers, each calling op over and over for d, and
// returns the latencies of the calls that reported success and how long
// it all took.
func closedLoop(n int, d time.Duration, op func() bool) ([]int64, time.Duration) {
	var (
		mu  sync.Mutex
		all []int64
		wg  sync.WaitGroup
	)
	start := time.Now()
	stop := start.Add(d)
	for range n {
		wg.Go(func() {
			var lat []int64
			for time.Now().Before(stop) {
				t := time.Now()
				if op() {
					lat = append(lat, int64(time.Since(t)))
				}
			}
			mu.Lock()
			all = append(all, lat...)
			mu.Unlock()
		})
	}
	wg.Wait()
	return all, time.Since(start)
}

type raftCluster struct {
	logger hclog.Logger
	nodes  []*raft.Raft
	closes []func() error
}

func startRaft(ctx context.Context, dir, store string, n int) (*raftCluster, error) {
	logger := hclog.New(&hclog.LoggerOptions{Name: "bare-raft", Level: hclog.Error, Output: hclog.DefaultOutput})
	c := &raftCluster{logger: logger}
	var (
		trans   []*raft.NetworkTransport
		servers []raft.Server
	)
	for i := range n {
		t, err := raft.NewTCPTransportWithLogger("127.0.0.1:0", nil, 3, 10*time.Second, logger)
		if err != nil {
			c.shutdown()
			return nil, err
		}
		c.closes = append(c.closes, t.Close)
		trans = append(trans, t)
		servers = append(servers, raft.Server{
			Suffrage: raft.Voter,
			ID:       raft.ServerID(fmt.Sprintf("n%d", i)),
			Address:  t.LocalAddr(),
		})
	}
	for i := range n {
		r, err := startNode(filepath.Join(dir, fmt.Sprintf("n%d", i)), store, servers[i].ID, trans[i], servers, logger, c)
		if err != nil {
			c.shutdown()
			return nil, err
		}
		c.nodes = append(c.nodes, r)
	}
	if _, err := c.leader(ctx); err != nil {
		c.shutdown()
		return nil, err
	}
	return c, nil
}

// logStore is what a bare node stores its log and its stable state in.
type logStore interface {
	raft.LogStore
	raft.StableStore
}

// openStore opens a bare node's store like the node package does: bolt
// with its options, or raft-wal with a bolt meta store that is closed too.
// closes release it.
func openStore(dir, store string) (st logStore, closes []func() error, err error) {
	if store == StoreWAL {
		if err := os.MkdirAll(dir+".wal", 0o700); err != nil {
			return nil, nil, err
		}
		meta := &metadb.BoltMetaDB{}
		w, err := wal.Open(dir+".wal", wal.WithMetaStore(meta))
		if err != nil {
			return nil, nil, err
		}
		return w, []func() error{w.Close, meta.Close}, nil
	}
	db, err := raftboltdb.New(raftboltdb.Options{
		Path: dir + ".db",
		BoltOptions: &bbolt.Options{
			Timeout:        time.Second,
			NoFreelistSync: true,
			FreelistType:   bbolt.FreelistMapType,
		},
	})
	if err != nil {
		return nil, nil, err
	}
	return db, []func() error{db.Close}, nil
}

func startNode(dir, store string, id raft.ServerID, t raft.Transport, servers []raft.Server, logger hclog.Logger, c *raftCluster) (*raft.Raft, error) {
	r, closes, err := StartNode(dir, store, id, t, servers, countFSM{}, bareTiming(), logger)
	c.closes = append(c.closes, closes...)
	return r, err
}

// Timing are the Raft timeouts of a node StartNode starts.
type Timing struct{ Heartbeat, Election, LeaderLease, Commit time.Duration }

// StartNode bootstraps (servers) and starts a bare hashicorp/raft node in
// dir with store (StoreBolt or StoreWAL, opened as raftlock opens them),
// the given state machine, transport and timeouts. closes release its
// stores, to be called after the node's Shutdown, also when err is not nil.
func StartNode(dir, store string, id raft.ServerID, t raft.Transport, servers []raft.Server, fsm raft.FSM, tm Timing, logger hclog.Logger) (r *raft.Raft, closes []func() error, err error) {
	db, closes, err := openStore(dir, store)
	if err != nil {
		return nil, closes, err
	}
	logs, err := raft.NewLogCache(logCacheSize, db)
	if err != nil {
		return nil, closes, err
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(dir, 1, logger)
	if err != nil {
		return nil, closes, err
	}
	conf := raft.DefaultConfig()
	conf.LocalID = id
	conf.HeartbeatTimeout = tm.Heartbeat
	conf.ElectionTimeout = tm.Election
	conf.LeaderLeaseTimeout = tm.LeaderLease
	conf.CommitTimeout = tm.Commit
	conf.Logger = logger
	if err := raft.BootstrapCluster(conf, logs, db, snaps, t, raft.Configuration{Servers: servers}); err != nil {
		return nil, closes, err
	}
	r, err = raft.NewRaft(conf, fsm, logs, db, snaps, t)
	return r, closes, err
}

// leader waits for a leader and returns it.
func (c *raftCluster) leader(ctx context.Context) (*raft.Raft, error) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	for {
		for _, r := range c.nodes {
			if r.State() == raft.Leader {
				return r, nil
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("bare raft: no leader: %w", ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func (c *raftCluster) shutdown() {
	c.logger.SetLevel(hclog.Off) // connections reset by the shutdown are expected
	for _, r := range c.nodes {
		r.Shutdown().Error()
	}
	for _, f := range c.closes {
		f()
	}
}

// countFSM is a trivial state machine: it ignores the commands.
type countFSM struct{}

func (countFSM) Apply(*raft.Log) any                 { return nil }
func (countFSM) Snapshot() (raft.FSMSnapshot, error) { return emptySnapshot{}, nil }
func (countFSM) Restore(rc io.ReadCloser) error      { return rc.Close() }

type emptySnapshot struct{}

func (emptySnapshot) Persist(sink raft.SnapshotSink) error { return sink.Close() }
func (emptySnapshot) Release()                             {}
