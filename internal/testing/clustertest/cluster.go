// Package clustertest runs in-process raftlock clusters for tests: N nodes over
// an in-memory network (inside testing/synctest, on fake time) or over
// loopback TCP, with in-memory or bolt storage, formed from static peers or
// through gossip, and fault injection (partitions, isolation, crash and
// restart, graceful leave, a wiped data dir, new seeds).
//
// Several clusters may share one memnet network: give each its own
// Options.Prefix (node ids and hosts) and Options.Subnet (gossip addresses).
package clustertest

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/raftlock/raftlock/internal/nodeopts"
	"github.com/raftlock/raftlock/internal/testing/memnet"
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
	// LogStore is the durable nodes' log store (node.Config.LogStore;
	// default bolt).
	LogStore node.LogStore
	// Timing defaults to nodeopts.TestTiming().
	Timing node.Timing
	// Configure adjusts node i's config before it starts.
	Configure func(i int, c *node.Config)
	// Gossip forms the cluster through memberlist instead of static peers:
	// every node starts with BootstrapExpect (default Nodes) and one seed.
	// With Net, node i joins through node (i+1) mod Nodes, gossips on
	// GossipAddr(i) from host GossipHost(i) (so faults can cut gossip alone)
	// and uses nodeopts.TestGossipTiming(). Over loopback, nodes start in order on
	// 127.0.0.1:0 and join through node 0 (whose own seed list is empty),
	// with a gentler timing (LoopbackGossipTiming).
	Gossip bool
	// BootstrapExpect overrides the gossip bootstrap size (default Nodes):
	// e.g. 2N−1 nodes that expect N (formation races).
	BootstrapExpect int
	// Prefix names the nodes and their memnet hosts: Prefix+"1", … (default
	// "n"). Clusters sharing a network need different prefixes.
	Prefix string
	// Subnet is the second octet of the memnet gossip addresses
	// (10.Subnet.x.y:7946; default 0). Clusters sharing a network need
	// different subnets.
	Subnet int
	// Deferred lists nodes that Start configures but does not start; start
	// them with Launch.
	Deferred []int
	// Started, if set, is called with node i as soon as node.Start returned
	// it — at every start (Start, Launch, Add) and before the cluster
	// publishes it in Nodes — e.g. to subscribe to its events before it can
	// apply the first entry of a new cluster. (An entry can still be applied
	// during node.Start itself, while a gossip join attempt waits: the
	// nodes started before it see that one.)
	Started func(i int, n *node.Node)
}

// GossipAddr is node i's gossip address on a memnet network (default subnet).
func GossipAddr(i int) string { return gossipAddr(0, i) }

// GossipAddrIn is node i's gossip address in a cluster with the given
// Options.Subnet.
func GossipAddrIn(subnet, i int) string { return gossipAddr(subnet, i) }

func gossipAddr(subnet, i int) string {
	return fmt.Sprintf("10.%d.%d.%d:7946", subnet, (i+1)/250, (i+1)%250+1)
}

// GossipHost is the memnet host that node i gossips from (default prefix).
func GossipHost(i int) string { return ID(i) + "-gossip" }

// ID returns node i's id in a cluster with the default prefix.
func ID(i int) string { return fmt.Sprintf("n%d", i+1) }

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
// must be called from the test goroutine (or one goroutine at a time).
type Cluster struct {
	t     testing.TB
	opts  Options
	Nodes []*node.Node // nil while a node is down
	cfgs  []node.Config
	dirs  []string
}

// ID returns node i's id.
func (c *Cluster) ID(i int) string { return fmt.Sprintf("%s%d", c.opts.Prefix, i+1) }

// RaftHost is the memnet host of node i's Raft/RPC traffic.
func (c *Cluster) RaftHost(i int) string { return c.ID(i) }

// GossipHost is the memnet host that node i gossips from.
func (c *Cluster) GossipHost(i int) string { return c.ID(i) + "-gossip" }

// GossipAddr is node i's gossip address on the memnet network.
func (c *Cluster) GossipAddr(i int) string { return gossipAddr(c.opts.Subnet, i) }

// Size is the number of nodes configured (running or not).
func (c *Cluster) Size() int { return len(c.Nodes) }

// Start starts a bootstrapped cluster and registers its Close with t.Cleanup.
// It does not wait for a leader.
func Start(t testing.TB, opts Options) *Cluster {
	t.Helper()
	if opts.Nodes == 0 {
		opts.Nodes = 3
	}
	if opts.Timing == (node.Timing{}) {
		opts.Timing = nodeopts.TestTiming()
	}
	if opts.Prefix == "" {
		opts.Prefix = "n"
	}
	if opts.BootstrapExpect == 0 {
		opts.BootstrapExpect = opts.Nodes
	}
	c := &Cluster{t: t, opts: opts, Nodes: make([]*node.Node, opts.Nodes), cfgs: make([]node.Config, opts.Nodes), dirs: make([]string, opts.Nodes)}
	addrs := make([]string, opts.Nodes)
	lns := make([]net.Listener, opts.Nodes)
	deferred := map[int]bool{}
	for _, i := range opts.Deferred {
		deferred[i] = true
	}
	for i := range opts.Nodes {
		lns[i] = c.listen(i, "")
		addrs[i] = lns[i].Addr().String()
	}
	var peers []node.Peer
	for i, a := range addrs {
		peers = append(peers, node.Peer{ID: c.ID(i), Addr: a})
	}
	for i := range opts.Nodes {
		cfg := c.baseConfig(i, addrs[i])
		if opts.Gossip {
			cfg.BootstrapExpect = opts.BootstrapExpect
			if opts.Net != nil && opts.Nodes > 1 {
				cfg.Gossip.Join = []string{c.GossipAddr((i + 1) % opts.Nodes)}
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
		if deferred[i] {
			lns[i].Close() // Launch listens again on the same address
			continue
		}
		c.start(i, lns[i])
	}
	return c
}

// baseConfig is node i's config before the way to form the cluster is set.
func (c *Cluster) baseConfig(i int, addr string) node.Config {
	cfg := node.DefaultConfig()
	cfg.ID = c.ID(i)
	cfg.Timing = c.opts.Timing
	cfg.AttemptTimeout = 20 * c.opts.Timing.HeartbeatTimeout
	cfg.AdvertiseAddr = addr
	if c.opts.Durable {
		c.dirs[i] = filepath.Join(c.t.TempDir(), c.ID(i))
		cfg.DataDir = c.dirs[i]
		cfg.LogStore = c.opts.LogStore
	} else {
		cfg.InMemory = true
	}
	if c.opts.Net != nil {
		nodeopts.Hooks(&cfg).Dialer = c.opts.Net.Host(c.RaftHost(i)).Dial
	}
	if c.opts.Gossip {
		if c.opts.Net != nil {
			cfg.Gossip.Timing = nodeopts.TestGossipTiming()
		} else {
			cfg.Gossip.Addr = "127.0.0.1:0"
			cfg.Gossip.Timing = LoopbackGossipTiming()
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
		cfg.BootstrapExpect = c.opts.BootstrapExpect
		for j, n := range c.Nodes {
			if n != nil {
				if c.opts.Net != nil {
					cfg.Gossip.Join = []string{c.GossipAddr(j)}
				} else {
					cfg.Gossip.Join = []string{n.GossipAddr()}
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
	ln, err := c.tryListen(i, addr)
	if err != nil {
		c.t.Fatalf("listen for %s: %v", c.ID(i), err)
	}
	return ln
}

func (c *Cluster) tryListen(i int, addr string) (net.Listener, error) {
	switch {
	case c.opts.Net != nil && addr == "":
		return c.opts.Net.Host(c.RaftHost(i)).Listen(c.ID(i) + ":7400")
	case c.opts.Net != nil:
		return c.opts.Net.Host(c.RaftHost(i)).Listen(addr)
	case addr == "":
		return net.Listen("tcp", "127.0.0.1:0")
	default:
		return net.Listen("tcp", addr)
	}
}

func (c *Cluster) start(i int, ln net.Listener) {
	c.t.Helper()
	n, err := c.tryStart(i, ln)
	if err != nil {
		c.t.Fatalf("start %s: %v", c.ID(i), err)
	}
	c.Nodes[i] = n
}

// tryStart starts node i from its config and returns Start's error.
func (c *Cluster) tryStart(i int, ln net.Listener) (*node.Node, error) {
	cfg := c.cfgs[i]
	cfg.Listener = ln
	var gln net.Listener
	if c.opts.Gossip && c.opts.Net != nil && cfg.Gossip.Addr == "" && nodeopts.Hooks(&cfg).GossipListener == nil {
		var err error
		if gln, err = c.opts.Net.Host(c.GossipHost(i)).Listen(c.GossipAddr(i)); err != nil {
			ln.Close()
			return nil, fmt.Errorf("gossip listen: %w", err)
		}
		h := nodeopts.Hooks(&cfg)
		h.GossipListener, h.GossipDialer = gln, c.opts.Net.Host(c.GossipHost(i)).Dial
	}
	if c.opts.Gossip && c.opts.Net == nil && i > 0 && len(cfg.Gossip.Join) == 0 && c.Nodes[0] != nil {
		cfg.Gossip.Join = []string{c.Nodes[0].GossipAddr()}
		c.cfgs[i].Gossip.Join = cfg.Gossip.Join
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
		c.cfgs[i].Gossip.Addr = n.GossipAddr() // a restart binds the same port
	}
	if c.opts.Started != nil {
		c.opts.Started(i, n)
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
		cfg.BootstrapExpect = c.opts.BootstrapExpect
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
