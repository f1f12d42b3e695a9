// Package cluster runs a lock service as one process per replica on
// loopback: it re-executes the benchmark binary as replica processes (see
// package agent), reads their CPU time and RSS from /proc, kills the leader
// for the failover workload and stops them all at the end.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/raftlock/raftlock/bench/internal/agent"
	"github.com/raftlock/raftlock/bench/internal/lockservice"
	"github.com/raftlock/raftlock/bench/internal/procstat"
	"github.com/raftlock/raftlock/internal/testing/ports"
)

// Cluster is a running cluster of replica processes.
type Cluster struct {
	System string
	Nodes  []*Node

	dir  string              // the cluster's files
	cfgs []agent.ChildConfig // how each replica was started (Restart)
}

// Start starts an n-replica cluster of the named system with its files in a
// new directory under dir, and returns once every replica serves and a
// leader is known.
func Start(ctx context.Context, system string, n int, dir string) (*Cluster, error) {
	sys, err := lockservice.Lookup(system)
	if err != nil {
		return nil, err
	}
	dir, err = os.MkdirTemp(dir, system+"-")
	if err != nil {
		return nil, err
	}
	free, err := ports.Free(n * sys.PortsPerReplica())
	if err != nil {
		return nil, err
	}
	addrs := make([][]string, n)
	for i := range addrs {
		addrs[i] = free[i*sys.PortsPerReplica() : (i+1)*sys.PortsPerReplica()]
	}
	c := &Cluster{System: system, dir: dir}
	for i := range n {
		data := filepath.Join(dir, fmt.Sprintf("replica-%d", i))
		if err := os.Mkdir(data, 0o700); err != nil {
			c.Kill()
			return nil, err
		}
		cfg := agent.ChildConfig{System: system, Index: i, Addrs: addrs, DataDir: data}
		c.cfgs = append(c.cfgs, cfg)
		node, err := spawn(ctx, dir, cfg)
		if err != nil {
			c.Kill()
			return nil, err
		}
		c.Nodes = append(c.Nodes, node)
	}
	if err := c.waitReady(ctx); err != nil {
		c.Kill()
		return nil, err
	}
	if _, err := c.Leader(ctx, 30*time.Second); err != nil {
		c.Kill()
		return nil, err
	}
	return c, nil
}

// Restart kills replica i (SIGKILL: a crash) and starts it again on its
// data directory and ports; it returns how long the new process took from
// its start until the replica served again (raftlock: caught up with the
// leader's commit index; etcd: the member ready).
func (c *Cluster) Restart(ctx context.Context, i int) (time.Duration, error) {
	c.Nodes[i].Kill()
	start := time.Now()
	n, err := spawn(ctx, c.dir, c.cfgs[i])
	if err != nil {
		return 0, err
	}
	c.Nodes[i] = n
	if _, err := n.Agent.Wait(ctx, agent.WaitArgs{Timeout: agent.StartTimeout}); err != nil {
		return 0, fmt.Errorf("cluster: restart replica %d: %w%s", i, err, n.logTail())
	}
	return time.Since(start), nil
}

func (c *Cluster) waitReady(ctx context.Context) error {
	errs := make([]error, len(c.Nodes))
	var wg sync.WaitGroup
	for i, n := range c.Nodes {
		wg.Go(func() {
			if _, err := n.Agent.Wait(ctx, agent.WaitArgs{Timeout: agent.StartTimeout}); err != nil {
				errs[i] = fmt.Errorf("cluster: replica %d: %w%s", i, err, n.logTail())
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Leader returns the index of the replica that is leader, polling every
// live replica until exactly one claims it or the timeout passes.
func (c *Cluster) Leader(ctx context.Context, timeout time.Duration) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		leaders := 0
		leader := -1
		for i, n := range c.Nodes {
			if !n.Alive() {
				continue
			}
			st, err := n.Agent.Status(ctx)
			if err == nil && st.Leader {
				leaders++
				leader = i
			}
		}
		if leaders == 1 {
			return leader, nil
		}
		select {
		case <-ctx.Done():
			return -1, fmt.Errorf("cluster: no single leader after %v", timeout)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Live returns the indices of the replicas still running.
func (c *Cluster) Live() []int {
	var out []int
	for i, n := range c.Nodes {
		if n.Alive() {
			out = append(out, i)
		}
	}
	return out
}

// Usage returns every live replica's CPU time and RSS (zero for dead ones).
func (c *Cluster) Usage() ([]procstat.Usage, error) {
	out := make([]procstat.Usage, len(c.Nodes))
	for i, n := range c.Nodes {
		if !n.Alive() {
			continue
		}
		u, err := n.Usage()
		if err != nil {
			return nil, err
		}
		out[i] = u
	}
	return out, nil
}

// Kill ends every replica process with SIGKILL: their data directories are
// temporary, so there is nothing to shut down cleanly, and a kill is bounded
// in time. The directory stays until the benchmark removes its work
// directory.
func (c *Cluster) Kill() {
	var wg sync.WaitGroup
	for _, n := range c.Nodes {
		wg.Go(n.Kill)
	}
	wg.Wait()
}

// Crashed describes the replicas whose process ended without being killed
// (a crash) since the last call, with the end of each one's log.
func (c *Cluster) Crashed() []string {
	var out []string
	for i, n := range c.Nodes {
		if !n.Alive() && !n.killed.Load() && !n.crashed {
			n.crashed = true
			out = append(out, fmt.Sprintf("replica %d exited on its own%s", i, n.logTail()))
		}
	}
	return out
}
