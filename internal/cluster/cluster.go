// Package cluster runs in-process raftlock clusters for tests: N nodes over
// an in-memory network (inside testing/synctest, on fake time) or over
// loopback TCP, with in-memory or bolt storage, and fault injection
// (partitions, isolation, crash and restart).
package cluster

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/raftlock/raftlock/internal/memnet"
	"github.com/raftlock/raftlock/node"
)

// Options configures a test cluster.
type Options struct {
	// Nodes is the cluster size (default 3).
	Nodes int
	// Net, if set, carries all traffic (fault injection, synctest); otherwise
	// the nodes use loopback TCP.
	Net *memnet.Network
	// Durable stores each node's state in bolt under a test temp dir, so
	// that Restart resumes from disk; otherwise storage is in memory.
	Durable bool
	// Timing defaults to node.TestTiming().
	Timing node.Timing
	// Configure adjusts node i's config before it starts.
	Configure func(i int, c *node.Config)
}

// Cluster is a running test cluster. Methods call t.Fatal on failure and
// must be called from the test goroutine.
type Cluster struct {
	t     testing.TB
	opts  Options
	Nodes []*node.Node // nil while a node is down
	cfgs  []node.Config
	dirs  []string
}

// ID returns node i's id.
func ID(i int) string { return fmt.Sprintf("n%d", i+1) }

// Start starts a bootstrapped cluster and registers its Close with t.Cleanup.
// It does not wait for a leader.
func Start(t testing.TB, opts Options) *Cluster {
	t.Helper()
	if opts.Nodes == 0 {
		opts.Nodes = 3
	}
	if opts.Timing == (node.Timing{}) {
		opts.Timing = node.TestTiming()
	}
	c := &Cluster{t: t, opts: opts, Nodes: make([]*node.Node, opts.Nodes), cfgs: make([]node.Config, opts.Nodes), dirs: make([]string, opts.Nodes)}
	addrs := make([]string, opts.Nodes)
	lns := make([]net.Listener, opts.Nodes)
	for i := range opts.Nodes {
		lns[i] = c.listen(i, "")
		addrs[i] = lns[i].Addr().String()
	}
	var peers []node.Peer
	for i, a := range addrs {
		peers = append(peers, node.Peer{ID: ID(i), Addr: a})
	}
	for i := range opts.Nodes {
		cfg := node.DefaultConfig()
		cfg.ID = ID(i)
		cfg.Timing = opts.Timing
		cfg.ForwardTimeout = 20 * opts.Timing.HeartbeatTimeout
		cfg.Bootstrap, cfg.Peers = true, peers
		cfg.AdvertiseAddr = addrs[i]
		if opts.Durable {
			c.dirs[i] = filepath.Join(t.TempDir(), ID(i))
			cfg.DataDir = c.dirs[i]
		} else {
			cfg.InMemory = true
		}
		if opts.Net != nil {
			cfg.Dialer = opts.Net.Host(ID(i)).Dial
		}
		if opts.Configure != nil {
			opts.Configure(i, &cfg)
		}
		c.cfgs[i] = cfg
	}
	t.Cleanup(c.Close)
	for i := range opts.Nodes {
		c.start(i, lns[i])
	}
	return c
}

func (c *Cluster) listen(i int, addr string) net.Listener {
	c.t.Helper()
	var ln net.Listener
	var err error
	switch {
	case c.opts.Net != nil && addr == "":
		ln, err = c.opts.Net.Host(ID(i)).Listen(ID(i) + ":7400")
	case c.opts.Net != nil:
		ln, err = c.opts.Net.Host(ID(i)).Listen(addr)
	case addr == "":
		ln, err = net.Listen("tcp", "127.0.0.1:0")
	default:
		ln, err = net.Listen("tcp", addr)
	}
	if err != nil {
		c.t.Fatalf("listen for %s: %v", ID(i), err)
	}
	return ln
}

func (c *Cluster) start(i int, ln net.Listener) {
	c.t.Helper()
	cfg := c.cfgs[i]
	cfg.Listener = ln
	n, err := node.Start(context.Background(), cfg)
	if err != nil {
		ln.Close()
		c.t.Fatalf("start %s: %v", ID(i), err)
	}
	c.Nodes[i] = n
}

// Config returns node i's configuration.
func (c *Cluster) Config(i int) node.Config { return c.cfgs[i] }

// Stop closes node i gracefully (a leader hands leadership over first).
func (c *Cluster) Stop(i int) {
	c.t.Helper()
	c.stop(i, false)
}

// Crash stops node i abruptly: no leadership hand-off; its storage survives.
func (c *Cluster) Crash(i int) {
	c.t.Helper()
	c.stop(i, true)
}

func (c *Cluster) stop(i int, crash bool) {
	n := c.Nodes[i]
	if n == nil {
		return
	}
	c.Nodes[i] = nil
	ctx, cancel := context.WithTimeout(context.Background(), 100*c.opts.Timing.ElectionTimeout)
	defer cancel()
	var err error
	if crash {
		err = n.Kill(ctx)
	} else {
		err = n.Close(ctx)
	}
	if err != nil {
		c.t.Fatalf("stop %s: %v", ID(i), err)
	}
}

// Restart starts node i again with the same id, address and data dir.
func (c *Cluster) Restart(i int) {
	c.t.Helper()
	if c.Nodes[i] != nil {
		c.t.Fatalf("restart %s: still running", ID(i))
	}
	if !c.opts.Durable {
		c.t.Fatalf("restart %s: in-memory nodes cannot restart with their state", ID(i))
	}
	c.start(i, c.listen(i, c.cfgs[i].AdvertiseAddr))
}

// Close stops every running node (registered with t.Cleanup by Start).
func (c *Cluster) Close() {
	for i := range c.Nodes {
		if n := c.Nodes[i]; n != nil {
			c.Nodes[i] = nil
			ctx, cancel := context.WithTimeout(context.Background(), 100*c.opts.Timing.ElectionTimeout)
			n.Kill(ctx)
			cancel()
		}
	}
}

// WaitLeader waits until the running nodes agree on one leader among them,
// and returns its index.
func (c *Cluster) WaitLeader(timeout time.Duration) int {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if i, ok := c.agreedLeader(); ok {
			return i
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("no agreed leader within %v: %s", timeout, c.describe())
		}
		time.Sleep(c.opts.Timing.HeartbeatTimeout / 5)
	}
}

func (c *Cluster) agreedLeader() (int, bool) {
	leader := -1
	for i, n := range c.Nodes {
		if n == nil {
			continue
		}
		st := n.Status()
		if st.State == "leader" {
			if leader >= 0 {
				return -1, false
			}
			leader = i
		}
	}
	if leader < 0 {
		return -1, false
	}
	for _, n := range c.Nodes {
		if n != nil && n.Status().LeaderID != ID(leader) {
			return -1, false
		}
	}
	return leader, true
}

// WaitReady waits until every running node is ready.
func (c *Cluster) WaitReady(timeout time.Duration) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for i, n := range c.Nodes {
		if n == nil {
			continue
		}
		if err := n.WaitReady(ctx); err != nil {
			c.t.Fatalf("%s not ready: %v (%s)", ID(i), err, c.describe())
		}
	}
}

// Follower returns the index of a running node other than the leader.
func (c *Cluster) Follower(leader int) int {
	for i, n := range c.Nodes {
		if n != nil && i != leader {
			return i
		}
	}
	c.t.Fatal("no running follower")
	return -1
}

// Isolate cuts node i off from every other node (both directions).
func (c *Cluster) Isolate(i int) { c.net().Isolate(ID(i)) }

// Partition splits the nodes into groups of indexes that cannot reach each other.
func (c *Cluster) Partition(groups ...[]int) {
	var g [][]string
	for _, grp := range groups {
		var ids []string
		for _, i := range grp {
			ids = append(ids, ID(i))
		}
		g = append(g, ids)
	}
	c.net().Partition(g...)
}

// Heal removes every network fault.
func (c *Cluster) Heal() { c.net().Heal() }

func (c *Cluster) net() *memnet.Network {
	if c.opts.Net == nil {
		c.t.Fatal("fault injection needs Options.Net")
	}
	return c.opts.Net
}

func (c *Cluster) describe() string {
	s := ""
	for i, n := range c.Nodes {
		if n == nil {
			s += fmt.Sprintf("%s=down ", ID(i))
			continue
		}
		st := n.Status()
		s += fmt.Sprintf("%s=%s(leader %q, term %d, applied %d) ", ID(i), st.State, st.LeaderID, st.Term, st.AppliedIndex)
	}
	return s
}
