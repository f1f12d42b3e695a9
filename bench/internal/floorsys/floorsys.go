// Package floorsys is the floor under a lock service built like raftlock,
// run by the bench as a system of its own: the same hashicorp/raft v1.7.3
// and log store (raft-boltdb/v2 or raft-wal, opened as raftlock opens them),
// raftlock's default timeouts, three replicas in three processes with the
// workers in them, a follower's commands forwarded to the leader, and the
// leader's group commit — with nothing else. Its state machine is a set of
// held names, each with a FIFO line of waiters: a Lock of a held name waits
// in line, and an Unlock hands the name to the first waiter in the same
// entry. The waiter learns of it the cheapest way the layout allows: the
// leader holds back the answer to its Lock (a local caller's, or the reply
// to its replica's forwarded call) until the entry that granted it is
// applied on the leader — one message from the leader to the waiter's
// replica per hand-off, as raftlock's grant announcement, but to that
// replica only. It has no sessions (NewSession and Close cost nothing, a
// session is never lost, the TTL is ignored), no leases, fencing tokens,
// request numbers, quotas, metrics or retries, and its waiters do not
// survive a change of leader (they fail). As raftlock's leader, it holds a
// batch of Locks that would only join a line back until another command
// comes, or for the last commit's time (at most gatherWait). The forward is one TCP connection per
// follower with no forward limit and no linger of its own (frames queued
// together are written together); the leader keeps one entry in flight and
// sends the next once the last one's callers are back with their next
// command, or after gatherWait.
//
// What raftlock adds to a Lock+Unlock on top of this is its own cost; what
// this floor costs on a machine is what the architecture costs there. It
// answers the uncontended, distinct and contended (one lock, hand-offs)
// workloads, and the keepalive workload's idle window: there it holds the
// names and has nothing to renew, so its CPU and wake-ups are what three
// idle hashicorp/raft replicas cost at raftlock's timeouts (heartbeats, the
// Go runtime) — the part of raftlock's idle cost that raftlock's own code
// does not add.
package floorsys

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/raftlock/raftlock/node"

	"github.com/raftlock/raftlock/bench/internal/limits"
	"github.com/raftlock/raftlock/bench/internal/lockservice"
)

// The system names: on raft-boltdb/v2 and on raft-wal.
const (
	Name    = "raft-floor"
	WALName = "raft-floor-wal"
)

// Errors of a Lock or Unlock.
var (
	// ErrRefused: Unlock of a name that is not held, or a name too long.
	ErrRefused = errors.New("floor: refused (not held)")
	// ErrNotCommitted: no leader, a lost forward connection or a replica
	// shutting down; the command may or may not have committed.
	ErrNotCommitted = errors.New("floor: not committed")
)

// System is the floor on raft-boltdb/v2.
func System() lockservice.System { return system{name: Name, store: limits.StoreBolt} }

// WALSystem is the floor on raft-wal.
func WALSystem() lockservice.System { return system{name: WALName, store: limits.StoreWAL} }

type system struct{ name, store string }

func (s system) Name() string { return s.name }

// PortsPerReplica: Raft's and the forward's.
func (system) PortsPerReplica() int { return 2 }

func (s system) StartReplica(ctx context.Context, cfg lockservice.ReplicaConfig) (lockservice.Replica, error) {
	logger := hclog.New(&hclog.LoggerOptions{Name: s.name, Level: hclog.Error, Output: cfg.Log})
	self := cfg.Addrs[cfg.Index]
	trans, err := raft.NewTCPTransportWithLogger(self[0], nil, 3, 10*time.Second, logger)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.name, err)
	}
	var servers []raft.Server
	for i, a := range cfg.Addrs {
		servers = append(servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(fmt.Sprintf("f%d", i)), Address: raft.ServerAddress(a[0])})
	}
	t := node.LANTiming()
	tm := limits.Timing{Heartbeat: t.HeartbeatTimeout, Election: t.ElectionTimeout, LeaderLease: t.LeaderLeaseTimeout, Commit: t.CommitTimeout}
	fsm := newHeldNames()
	r, closes, err := limits.StartNode(cfg.DataDir+"/raft", s.store, servers[cfg.Index].ID, trans, servers, fsm, tm, logger)
	rep := &replica{addrs: cfg.Addrs, r: r, trans: trans, closes: closes, stop: make(chan struct{})}
	if err != nil {
		rep.Close(ctx)
		return nil, fmt.Errorf("%s: start node %d: %w", s.name, cfg.Index, err)
	}
	if rep.l, err = net.Listen("tcp", self[1]); err != nil {
		rep.Close(ctx)
		return nil, fmt.Errorf("%s: %w", s.name, err)
	}
	rep.g = newGroupCommit(r, fsm, cfg.Index)
	rep.wg.Go(func() { rep.g.run(rep.stop) })
	rep.wg.Go(func() { serve(rep.l, rep.g, rep.stop, &rep.wg) })
	for { // the seam's contract: return once a leader is known
		if addr, _ := r.LeaderWithID(); addr != "" {
			return rep, nil
		}
		select {
		case <-ctx.Done():
			rep.Close(context.Background())
			return nil, fmt.Errorf("%s: replica %d: no leader: %w", s.name, cfg.Index, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

type replica struct {
	addrs  [][]string
	r      *raft.Raft
	trans  *raft.NetworkTransport
	closes []func() error
	l      net.Listener
	g      *groupCommit
	stop   chan struct{}
	wg     sync.WaitGroup

	mu        sync.Mutex
	fwd       *client // to the leader at fwdAddr
	fwdAddr   string
	closeOnce sync.Once
}

// propose commits op on name: through the local group commit on the
// leader, else forwarded to the leader.
func (r *replica) propose(ctx context.Context, op byte, name string) error {
	var cmd [cmdSize]byte
	if err := encodeCommand(cmd[:], op, name); err != nil {
		return err
	}
	var res byte
	if r.r.State() == raft.Leader {
		done := make(chan byte, 1)
		r.g.submit(waiter{cmd: cmd, done: func(b byte) { done <- b }})
		select {
		case res = <-done:
		case <-ctx.Done():
			return fmt.Errorf("%w: %w", ErrNotCommitted, ctx.Err())
		}
	} else {
		c, err := r.forwarder()
		if err != nil {
			return err
		}
		res = c.call(&cmd, ctx.Done())
	}
	switch res {
	case resOK:
		return nil
	case resRefused:
		return fmt.Errorf("%w: %q", ErrRefused, name)
	default:
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("%w: %w", ErrNotCommitted, err)
		}
		return ErrNotCommitted
	}
}

// forwarder returns the connection to the current leader's forward port.
func (r *replica) forwarder() (*client, error) {
	leader, _ := r.r.LeaderWithID()
	addr := ""
	for _, a := range r.addrs {
		if a[0] == string(leader) {
			addr = a[1]
		}
	}
	if addr == "" {
		return nil, fmt.Errorf("%w: no leader known", ErrNotCommitted)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fwd != nil && r.fwdAddr == addr && !r.fwd.isBroken() {
		return r.fwd, nil
	}
	if r.fwd != nil {
		r.fwd.close()
	}
	c, err := dialClient(addr)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotCommitted, err)
	}
	r.fwd, r.fwdAddr = c, addr
	return c, nil
}

func (r *replica) NewSession(context.Context, time.Duration) (lockservice.Session, error) {
	return &session{r: r, done: make(chan struct{})}, nil
}

func (r *replica) Status(context.Context) (lockservice.Status, error) {
	return lockservice.Status{Leader: r.r.State() == raft.Leader, LogIndex: r.r.CommitIndex()}, nil
}

func (r *replica) Close(context.Context) error {
	var err error
	r.closeOnce.Do(func() {
		close(r.stop)
		if r.l != nil {
			r.l.Close()
		}
		if r.r != nil {
			err = r.r.Shutdown().Error()
		}
		r.trans.Close()
		r.mu.Lock()
		if r.fwd != nil {
			r.fwd.close()
		}
		r.mu.Unlock()
		r.wg.Wait()
		for _, f := range r.closes {
			f()
		}
	})
	return err
}

// session is nothing but a way to its replica.
type session struct {
	r    *replica
	done chan struct{} // never closed: a floor session is never lost
}

func (s *session) Lock(ctx context.Context, name string) (lockservice.Lease, error) {
	if err := s.r.propose(ctx, opLock, name); err != nil {
		return nil, err
	}
	return lease{s.r, name}, nil
}

func (s *session) Done() <-chan struct{} { return s.done }

func (s *session) Close(context.Context) error { return nil }

type lease struct {
	r    *replica
	name string
}

func (l lease) Unlock(ctx context.Context) error { return l.r.propose(ctx, opUnlock, l.name) }

// IsFloor reports whether name is one of this package's systems.
func IsFloor(name string) bool { return name == Name || name == WALName }
