// Package cluster runs in-process raftlock clusters for tests: N nodes over
// an in-memory network (inside testing/synctest, on fake time) or over
// loopback TCP, with in-memory or bolt storage, formed from static peers or
// through gossip, and fault injection (partitions, isolation, crash and
// restart).
package cluster

import (
	"context"
	"fmt"
	"net"
	"os"
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
	// Gossip forms the cluster through memberlist instead of static peers:
	// every node starts with BootstrapExpect = Nodes and one seed. With Net,
	// node i joins through node (i+1) mod Nodes, gossips on GossipAddr(i)
	// from host GossipHost(i) (so faults can cut gossip alone) and uses
	// node.TestGossipTiming(). Over loopback, nodes start in order on
	// 127.0.0.1:0 and join through node 0 (whose own seed list is empty),
	// with a gentler timing (LoopbackGossipTiming).
	Gossip bool
}

// GossipAddr is node i's gossip address on a memnet network.
func GossipAddr(i int) string { return fmt.Sprintf("10.0.%d.%d:7946", (i+1)/250, (i+1)%250+1) }

// GossipHost is the memnet host that node i gossips from.
func GossipHost(i int) string { return ID(i) + "-gossip" }

// LoopbackGossipTiming is the gossip timing of loopback test clusters:
// tolerant of a loaded machine.
func LoopbackGossipTiming() node.GossipTiming {
	return node.GossipTiming{
		ProbeInterval:     200 * time.Millisecond,
		ProbeTimeout:      100 * time.Millisecond,
		GossipInterval:    50 * time.Millisecond,
		PushPullInterval:  5 * time.Second,
		SuspicionMult:     4,
		TCPTimeout:        2 * time.Second,
		RetryJoinInterval: 200 * time.Millisecond,
	}
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
		cfg := c.baseConfig(i, addrs[i])
		if opts.Gossip {
			cfg.BootstrapExpect = opts.Nodes
			if opts.Net != nil && opts.Nodes > 1 {
				cfg.Join = []string{GossipAddr((i + 1) % opts.Nodes)}
			}
		} else {
			cfg.Bootstrap, cfg.Peers = true, peers
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

// baseConfig is node i's config before the way to form the cluster is set.
func (c *Cluster) baseConfig(i int, addr string) node.Config {
	cfg := node.DefaultConfig()
	cfg.ID = ID(i)
	cfg.Timing = c.opts.Timing
	cfg.ForwardTimeout = 20 * c.opts.Timing.HeartbeatTimeout
	cfg.AdvertiseAddr = addr
	if c.opts.Durable {
		c.dirs[i] = filepath.Join(c.t.TempDir(), ID(i))
		cfg.DataDir = c.dirs[i]
	} else {
		cfg.InMemory = true
	}
	if c.opts.Net != nil {
		cfg.Dialer = c.opts.Net.Host(ID(i)).Dial
	}
	if c.opts.Gossip {
		if c.opts.Net != nil {
			cfg.GossipTiming = node.TestGossipTiming()
		} else {
			cfg.GossipAddr = "127.0.0.1:0"
			cfg.GossipTiming = LoopbackGossipTiming()
		}
	}
	return cfg
}

// Add starts one more node (index len(Nodes)) with the same options; in a
// gossip cluster it has the same BootstrapExpect and joins through the first
// running node. configure, if not nil, adjusts its config. It returns the
// new node's index.
func (c *Cluster) Add(configure func(c *node.Config)) int {
	c.t.Helper()
	i := len(c.Nodes)
	c.Nodes = append(c.Nodes, nil)
	c.dirs = append(c.dirs, "")
	ln := c.listen(i, "")
	cfg := c.baseConfig(i, ln.Addr().String())
	if c.opts.Gossip {
		cfg.BootstrapExpect = c.opts.Nodes
		for j, n := range c.Nodes {
			if n != nil {
				if c.opts.Net != nil {
					cfg.Join = []string{GossipAddr(j)}
				} else {
					cfg.Join = []string{n.GossipAddr()}
				}
				break
			}
		}
	}
	if c.opts.Configure != nil {
		c.opts.Configure(i, &cfg)
	}
	if configure != nil {
		configure(&cfg)
	}
	c.cfgs = append(c.cfgs, cfg)
	c.start(i, ln)
	return i
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
	n, err := c.tryStart(i, ln)
	if err != nil {
		c.t.Fatalf("start %s: %v", ID(i), err)
	}
	c.Nodes[i] = n
}

// tryStart starts node i from its config and returns Start's error.
func (c *Cluster) tryStart(i int, ln net.Listener) (*node.Node, error) {
	cfg := c.cfgs[i]
	cfg.Listener = ln
	var gln net.Listener
	if c.opts.Gossip && c.opts.Net != nil && cfg.GossipAddr == "" && cfg.GossipListener == nil {
		var err error
		if gln, err = c.opts.Net.Host(GossipHost(i)).Listen(GossipAddr(i)); err != nil {
			ln.Close()
			return nil, fmt.Errorf("gossip listen: %w", err)
		}
		cfg.GossipListener, cfg.GossipDialer = gln, c.opts.Net.Host(GossipHost(i)).Dial
	}
	if c.opts.Gossip && c.opts.Net == nil && i > 0 && len(cfg.Join) == 0 && c.Nodes[0] != nil {
		cfg.Join = []string{c.Nodes[0].GossipAddr()}
		c.cfgs[i].Join = cfg.Join
	}
	n, err := node.Start(context.Background(), cfg)
	if err != nil {
		ln.Close()
		if gln != nil {
			gln.Close()
		}
		return nil, err
	}
	if c.opts.Gossip && c.opts.Net == nil {
		c.cfgs[i].GossipAddr = n.GossipAddr() // a restart binds the same port
	}
	return n, nil
}

// TryAdd is like Add but returns Start's error instead of failing the test
// (the node is not added then).
func (c *Cluster) TryAdd(configure func(c *node.Config)) (*node.Node, error) {
	c.t.Helper()
	i := len(c.Nodes)
	ln := c.listen(i, "")
	c.dirs = append(c.dirs, "")
	cfg := c.baseConfig(i, ln.Addr().String())
	if c.opts.Gossip {
		cfg.BootstrapExpect = c.opts.Nodes
	}
	if configure != nil {
		configure(&cfg)
	}
	c.cfgs = append(c.cfgs, cfg)
	c.Nodes = append(c.Nodes, nil)
	n, err := c.tryStart(i, ln)
	if err != nil {
		c.Nodes, c.cfgs, c.dirs = c.Nodes[:i], c.cfgs[:i], c.dirs[:i]
		return nil, err
	}
	c.Nodes[i] = n
	return n, nil
}

// Reconfigure changes node i's configuration for its next Restart.
func (c *Cluster) Reconfigure(i int, change func(cfg *node.Config)) { change(&c.cfgs[i]) }

// Config returns node i's configuration.
func (c *Cluster) Config(i int) node.Config { return c.cfgs[i] }

// Stop closes node i gracefully (a leader hands leadership over first).
func (c *Cluster) Stop(i int) {
	c.t.Helper()
	c.stop(i, false)
}

// Leave decommissions node i (node.Leave: removed from the configuration,
// guarded, then stopped). It fails the test if Leave returns an error.
func (c *Cluster) Leave(i int) {
	c.t.Helper()
	if err := c.TryLeave(i); err != nil {
		c.t.Fatalf("leave %s: %v", ID(i), err)
	}
}

// TryLeave is Leave returning node.Leave's error (the node is stopped
// either way).
func (c *Cluster) TryLeave(i int) error {
	n := c.Nodes[i]
	if n == nil {
		return nil
	}
	c.Nodes[i] = nil
	ctx, cancel := context.WithTimeout(context.Background(), 100*c.opts.Timing.ElectionTimeout)
	defer cancel()
	return n.Leave(ctx)
}

// Wipe deletes node i's data dir (the node must be down): a replaced disk.
// Restart then starts it with the same id and address and an empty data
// dir. Without Durable, a restart is always a wipe.
func (c *Cluster) Wipe(i int) {
	c.t.Helper()
	if c.Nodes[i] != nil {
		c.t.Fatalf("wipe %s: still running", ID(i))
	}
	if c.dirs[i] != "" {
		if err := os.RemoveAll(c.dirs[i]); err != nil {
			c.t.Fatalf("wipe %s: %v", ID(i), err)
		}
	}
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

// Restart starts node i again with the same id, address and data dir (an
// in-memory node restarts empty: a new incarnation, as after a wipe).
func (c *Cluster) Restart(i int) {
	c.t.Helper()
	if c.Nodes[i] != nil {
		c.t.Fatalf("restart %s: still running", ID(i))
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
	if c.opts.Gossip && c.opts.Net != nil {
		// memberlist leaves a few goroutines behind its Shutdown, each ending
		// on a timer (an indirect probe's nack, a stream's deadline). Inside a
		// synctest bubble fake time no longer advances once the test
		// function has returned, so let them end now.
		var wait time.Duration
		for _, cfg := range c.cfgs {
			wait = max(wait, 2*cfg.GossipTiming.TCPTimeout)
		}
		time.Sleep(wait)
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

// Eventually polls cond until it holds, failing the test after timeout with
// cond's last description and the cluster's state.
func (c *Cluster) Eventually(timeout time.Duration, cond func() (bool, string)) {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, why := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("not within %v: %s; cluster: %s", timeout, why, c.describe())
		}
		time.Sleep(c.opts.Timing.HeartbeatTimeout / 5)
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

// Isolate cuts node i off from every other node (both directions), gossip
// included.
func (c *Cluster) Isolate(i int) {
	c.net().Isolate(ID(i))
	if c.opts.Gossip {
		c.net().Isolate(GossipHost(i))
	}
}

// IsolateGossip cuts node i's gossip off from every other node; its Raft
// traffic still flows.
func (c *Cluster) IsolateGossip(i int) { c.net().Isolate(GossipHost(i)) }

// Partition splits the nodes into groups of indexes that cannot reach each other.
func (c *Cluster) Partition(groups ...[]int) {
	var g [][]string
	for _, grp := range groups {
		var ids []string
		for _, i := range grp {
			ids = append(ids, ID(i))
			if c.opts.Gossip {
				ids = append(ids, GossipHost(i))
			}
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
		s += fmt.Sprintf("%s=%s(leader %q, term %d, applied %d", ID(i), st.State, st.LeaderID, st.Term, st.AppliedIndex)
		if c.opts.Gossip {
			var ms []string
			for _, m := range st.Members {
				ms = append(ms, fmt.Sprintf("%s:%s/%s", m.ID, m.State, m.Role))
			}
			s += fmt.Sprintf(", members %v", ms)
			if st.GossipErr != "" {
				s += ", gossip error " + st.GossipErr
			}
		}
		s += ") "
	}
	return s
}
