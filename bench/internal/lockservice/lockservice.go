// Package lockservice is the seam between the benchmark and a lock service
// under test. An adapter (etcd, raftlock) implements System; everything else in
// the benchmark — processes, workloads, accounting, reports — is generic.
//
// One replica of the service runs in each replica process, together with the
// client side that an application embedded in that process would use: for
// raftlock the library itself, for etcd an embedded member plus a clientv3
// client given every member's endpoint. Workloads run inside those processes,
// so the CPU and memory of a replica process include its share of the client
// work for both systems alike.
package lockservice

import (
	"context"
	"io"
	"time"
)

// System starts replicas of one lock service.
type System interface {
	// Name is the system's name on the command line and in reports.
	Name() string
	// PortsPerReplica is how many loopback ports each replica needs
	// (etcd: peer and client; raftlock: raft/RPC and gossip).
	PortsPerReplica() int
	// StartReplica starts replica cfg.Index of a new cluster of len(cfg.Addrs)
	// replicas and returns once it serves requests (a leader is known). The
	// other replicas are started concurrently in their own processes.
	StartReplica(ctx context.Context, cfg ReplicaConfig) (Replica, error)
}

// ReplicaConfig describes one replica of a static cluster on loopback.
type ReplicaConfig struct {
	Index   int        // this replica, in [0, len(Addrs))
	Addrs   [][]string // Addrs[i]: the PortsPerReplica "127.0.0.1:port" addresses reserved for replica i
	DataDir string     // an empty directory owned by this replica, on the benchmark's disk
	Log     io.Writer  // where the replica writes diagnostics (errors only)
}

// Replica is one running replica with its embedded client side.
type Replica interface {
	// NewSession opens a session (etcd: a lease with keepalive; raftlock: a
	// lockapi session) with the given TTL, attached to this replica.
	NewSession(ctx context.Context, ttl time.Duration) (Session, error)
	// Status reports this replica's view of the cluster.
	Status(ctx context.Context) (Status, error)
	// Close stops the replica, releasing its files and ports.
	Close(ctx context.Context) error
}

// Status is a replica's view of the cluster.
type Status struct {
	Leader bool // this replica is the leader
	// LogIndex is the index of the last log entry this replica knows
	// committed (etcd: the raft committed index; raftlock: the raft commit or
	// applied index). Differences over time count log entries.
	LogIndex uint64
}

// Session is a client session whose liveness the service tracks.
type Session interface {
	// Lock blocks until the named lock is granted to this session (waiting
	// in line behind other holders) or ctx ends.
	Lock(ctx context.Context, name string) (Lease, error)
	// Done is closed when the session is lost (expired or closed).
	Done() <-chan struct{}
	// Close ends the session, releasing every lock it holds.
	Close(ctx context.Context) error
}

// Lease is one granted lock.
type Lease interface {
	// Unlock releases the lock.
	Unlock(ctx context.Context) error
}

// SemaphoreSession is a Session of a system with counting semaphores
// (optional: a system without them does not run the semaphore workload).
type SemaphoreSession interface {
	// Acquire blocks until n permits of the named semaphore of limit
	// permits are granted (FIFO) or ctx ends.
	Acquire(ctx context.Context, name string, limit, n int) (Lease, error)
}

// RWSession is a Session of a system with read-write locks (optional).
type RWSession interface {
	// RLock blocks until a read grant of the named lock is granted or ctx
	// ends; WLock likewise for the write grant.
	RLock(ctx context.Context, name string) (Lease, error)
	WLock(ctx context.Context, name string) (Lease, error)
}

// Snapshotter is a Replica that can write a full copy of its state now
// (optional; the cost-at-scale workload measures it). raftlock: a Raft
// snapshot (node.Operator.Snapshot); etcd: the member's backend snapshot
// (Maintenance.Snapshot), read to the end.
type Snapshotter interface {
	// Snapshot returns the snapshot's size in bytes once it is complete.
	Snapshot(ctx context.Context) (int64, error)
}
