package agent

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
	"sync"
	"time"

	"github.com/raftlock/raftlock/bench/internal/lockservice"
)

// Agent is the net/rpc service of a replica process. Its exported methods are
// the calls the parent can make.
type Agent struct {
	ctx    context.Context // ends when the process shuts down
	index  int
	system string // the system's registered name, set before ready closes

	ready   chan struct{} // closed once the replica started or failed
	replica lockservice.Replica
	err     error // why the replica did not start

	mu    sync.Mutex
	pool  []lockservice.Session // the current session pool
	ttl   time.Duration         // the pool's session TTL
	held  []lockservice.Lease   // leases taken by Hold and StartAwait
	await *awaiting             // the last StartAwait's calls
}

func newAgent(ctx context.Context, index int) *Agent {
	return &Agent{ctx: ctx, index: index, ready: make(chan struct{})}
}

// start starts the replica; Wait reports the outcome.
func (a *Agent) start(sys lockservice.System, cfg lockservice.ReplicaConfig, timeout time.Duration) {
	ctx, cancel := context.WithTimeout(a.ctx, timeout)
	defer cancel()
	a.system = sys.Name()
	a.replica, a.err = sys.StartReplica(ctx, cfg)
	close(a.ready)
}

func (a *Agent) started() (lockservice.Replica, error) {
	select {
	case <-a.ready:
		return a.replica, a.err
	default:
		return nil, fmt.Errorf("replica %d: not started yet", a.index)
	}
}

// Wait blocks until the replica has started (or failed to), then reports its
// status.
func (a *Agent) Wait(args WaitArgs, reply *StatusReply) error {
	select {
	case <-a.ready:
	case <-time.After(args.Timeout):
		return fmt.Errorf("replica %d: not started after %v", a.index, args.Timeout)
	}
	return a.Status(Empty{}, reply)
}

// Status reports the replica's view of the cluster.
func (a *Agent) Status(_ Empty, reply *StatusReply) error {
	r, err := a.started()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(a.ctx, 5*time.Second)
	defer cancel()
	st, err := r.Status(ctx)
	if err != nil {
		return err
	}
	*reply = StatusReply{Leader: st.Leader, LogIndex: st.LogIndex}
	return nil
}

// Mem collects garbage, returns free memory to the OS and reports the heap,
// so that the parent's RSS reading shows live memory for every system alike.
func (a *Agent) Mem(_ Empty, reply *MemReply) error {
	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	*reply = MemReply{HeapInuse: ms.HeapInuse, Sys: ms.Sys}
	return nil
}

// Snapshot makes the replica write a full copy of its state (if its system
// can: lockservice.Snapshotter) and reports its size and how long it took.
func (a *Agent) Snapshot(args SnapshotArgs, reply *SnapshotReply) error {
	r, err := a.started()
	if err != nil {
		return err
	}
	s, ok := r.(lockservice.Snapshotter)
	if !ok {
		return fmt.Errorf("replica %d: %s takes no snapshots", a.index, a.system)
	}
	ctx, cancel := context.WithTimeout(a.ctx, args.Timeout)
	defer cancel()
	start := time.Now()
	n, err := s.Snapshot(ctx)
	if err != nil {
		return err
	}
	*reply = SnapshotReply{Bytes: n, Took: time.Since(start)}
	return nil
}
