// Package raftlocksys is the raftlock adapter of the benchmark: each replica
// process embeds a raftlock node (raft-boltdb with fsync, node.DefaultConfig:
// LAN timing, group commit) of a static 3-node cluster on loopback, and
// lockapi sessions on it. A second system, raftlock-wal, is the same with
// the raft-wal log store (node.LogStoreWAL); a third, raftlock-hb1s, is the
// default with etcd's failure detection (HB1sTiming), for a like-for-like
// comparison of idle and keepalive CPU; a fourth, raftlock-fast, is the
// default with node.FastFailoverTiming (300 ms, the default before 500 ms).
package raftlocksys

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/raftlock/raftlock/lockapi"
	"github.com/raftlock/raftlock/node"

	"github.com/raftlock/raftlock/bench/internal/lockservice"
)

// Names of the systems.
const (
	Name    = "raftlock"
	WALName = "raftlock-wal"
	// HB1sName is opt-in (-systems): not part of a default run.
	HB1sName = "raftlock-hb1s"
	// FastName is opt-in too.
	FastName = "raftlock-fast"
)

// OptIn are the raftlock systems a run benchmarks only when -systems names
// them; All is every raftlock system, the default ones first.
var (
	OptIn = []string{HB1sName, FastName}
	All   = append([]string{Name, WALName}, OptIn...)
)

// FastSystem returns raftlock (raft-boltdb) with node.FastFailoverTiming.
func FastSystem() lockservice.System {
	t := node.FastFailoverTiming()
	return system{name: FastName, store: node.LogStoreBolt, timing: &t}
}

// System returns the raftlock system (raft-boltdb, the default log store).
func System() lockservice.System { return system{name: Name, store: node.LogStoreBolt} }

// WALSystem returns raftlock with the raft-wal log store.
func WALSystem() lockservice.System { return system{name: WALName, store: node.LogStoreWAL} }

// HB1sSystem returns raftlock (raft-boltdb) with HB1sTiming.
func HB1sSystem() lockservice.System {
	t := HB1sTiming()
	return system{name: HB1sName, store: node.LogStoreBolt, timing: &t}
}

// HB1sTiming is etcd's failure detection in hashicorp/raft's terms: etcd
// heartbeats every 100 ms and elects after 1 s (TickMs 100, ElectionMs
// 1000); hashicorp/raft heartbeats every HeartbeatTimeout/10 and a follower
// starts an election after one to two HeartbeatTimeouts. The lease is
// hashicorp/raft's default; the commit tick stays the default's.
func HB1sTiming() node.Timing {
	t := node.LANTiming()
	t.HeartbeatTimeout, t.ElectionTimeout, t.LeaderLeaseTimeout = time.Second, time.Second, 500*time.Millisecond
	return t
}

type system struct {
	name   string
	store  node.LogStore
	timing *node.Timing // nil: the default's
}

func (s system) Name() string { return s.name }

// PortsPerReplica is 1: the node's one port carries Raft and RPC; the
// cluster is static (Bootstrap with Peers), so no gossip port.
func (system) PortsPerReplica() int { return 1 }

func nodeID(i int) string { return fmt.Sprintf("r%d", i) }

// StartReplica starts the node and waits until it knows a leader and has
// caught up.
func (s system) StartReplica(ctx context.Context, cfg lockservice.ReplicaConfig) (lockservice.Replica, error) {
	c := node.DefaultConfig()
	c.ID = nodeID(cfg.Index)
	c.DataDir = cfg.DataDir // fsync on every commit
	c.LogStore = s.store
	if s.timing != nil {
		c.Timing = *s.timing
	}
	c.BindAddr = cfg.Addrs[cfg.Index][0]
	c.Bootstrap = true
	for i, a := range cfg.Addrs {
		c.Peers = append(c.Peers, node.Peer{ID: nodeID(i), Addr: a[0]})
	}
	c.Logger = slog.New(slog.NewTextHandler(cfg.Log, &slog.HandlerOptions{Level: slog.LevelError}))
	dump := newMetricsDump(s.name, cfg.Index)
	if dump != nil {
		c.Registerer = dump.reg
	}
	n, err := node.Start(ctx, c)
	if err != nil {
		return nil, fmt.Errorf("raftlock: start node %d: %w", cfg.Index, err)
	}
	if err := n.WaitReady(ctx); err != nil {
		n.Close(context.Background())
		return nil, fmt.Errorf("raftlock: node %d: %w", cfg.Index, err)
	}
	return &replica{n: n, dump: dump}, nil
}

type replica struct {
	n    *node.Node
	dump *metricsDump // nil unless EnvMetrics is set
}

func (r *replica) NewSession(ctx context.Context, ttl time.Duration) (lockservice.Session, error) {
	s, err := lockapi.NewSession(ctx, r.n, lockapi.WithTTL(ttl))
	if err != nil {
		return nil, err
	}
	return session{s}, nil
}

func (r *replica) Status(context.Context) (lockservice.Status, error) {
	st := r.n.Status()
	return lockservice.Status{Leader: st.State == "leader", LogIndex: st.CommitIndex}, nil
}

func (r *replica) Close(ctx context.Context) error {
	r.dump.close()
	return r.n.Close(ctx)
}

// Snapshot implements lockservice.Snapshotter: a Raft snapshot.
func (r *replica) Snapshot(ctx context.Context) (int64, error) {
	info, err := r.n.Operator().Snapshot(ctx)
	return info.Bytes, err
}

type session struct{ s *lockapi.Session }

func (s session) Lock(ctx context.Context, name string) (lockservice.Lease, error) {
	l, err := s.s.Lock(ctx, name)
	if err != nil {
		return nil, err
	}
	return l, nil // *lockapi.Lease has Unlock(ctx) error
}

func (s session) Done() <-chan struct{} { return s.s.Done() }

func (s session) Close(ctx context.Context) error { return s.s.Close(ctx) }

// Acquire implements lockservice.SemaphoreSession.
func (s session) Acquire(ctx context.Context, name string, limit, n int) (lockservice.Lease, error) {
	l, err := s.s.Acquire(ctx, lockapi.Semaphore{Name: name, Limit: limit}, n)
	if err != nil {
		return nil, err
	}
	return l, nil
}

// RLock implements lockservice.RWSession.
func (s session) RLock(ctx context.Context, name string) (lockservice.Lease, error) {
	l, err := s.s.RLock(ctx, name)
	if err != nil {
		return nil, err
	}
	return l, nil
}

// WLock implements lockservice.RWSession: the writer is the lock itself.
func (s session) WLock(ctx context.Context, name string) (lockservice.Lease, error) {
	return s.Lock(ctx, name)
}
