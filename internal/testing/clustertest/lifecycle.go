package clustertest

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/raftlock/raftlock/internal/nodeopts"
	"github.com/raftlock/raftlock/node"
)

// StopMode is how a node is stopped.
type StopMode int

// Ways to stop a node.
const (
	// Graceful is node.Close: a leader hands leadership over first; with
	// gossip the node says it leaves (a restart, once Close and Leave differ).
	Graceful StopMode = iota
	// Crashed is nodeopts.Kill: no hand-off, no gossip leave; storage survives.
	Crashed
	// Decommission is node.Leave: the node leaves the cluster for good.
	Decommission
)

func (m StopMode) String() string {
	switch m {
	case Graceful:
		return "close"
	case Crashed:
		return "kill"
	case Decommission:
		return "leave"
	}
	return fmt.Sprintf("StopMode(%d)", int(m))
}

// Config returns node i's configuration.
func (c *Cluster) Config(i int) node.Config { return c.cfgs[i] }

// DataDir returns node i's data dir ("" for in-memory nodes).
func (c *Cluster) DataDir(i int) string { return c.dirs[i] }

// Stop closes node i gracefully (a leader hands leadership over first).
func (c *Cluster) Stop(i int) {
	c.t.Helper()
	if err := c.TryStop(i, Graceful); err != nil {
		c.t.Fatal(err)
	}
}

// Crash stops node i abruptly: no leadership hand-off; its storage survives.
func (c *Cluster) Crash(i int) {
	c.t.Helper()
	if err := c.TryStop(i, Crashed); err != nil {
		c.t.Fatal(err)
	}
}

// Leave decommissions node i (node.Leave) and stops it.
func (c *Cluster) Leave(i int) {
	c.t.Helper()
	if err := c.TryStop(i, Decommission); err != nil {
		c.t.Fatal(err)
	}
}

// TryStop stops node i (a no-op when it is down) and returns the stop's
// error instead of failing the test; the node counts as down either way.
// Each stop is bounded by 100 election timeouts (at least 30 s on a real
// loopback network).
func (c *Cluster) TryStop(i int, mode StopMode) error {
	n := c.Nodes[i]
	if n == nil {
		return nil
	}
	c.Nodes[i] = nil
	ctx, cancel := context.WithTimeout(context.Background(), c.stopBound())
	defer cancel()
	var err error
	switch mode {
	case Crashed:
		err = nodeopts.Kill(ctx, n)
	case Decommission:
		err = n.Leave(ctx)
	default:
		err = n.Close(ctx)
	}
	if err != nil {
		return fmt.Errorf("stop (%s) %s: %w", mode, c.ID(i), err)
	}
	return nil
}

// Restart starts node i again with the same id, address and data dir.
func (c *Cluster) Restart(i int) {
	c.t.Helper()
	if !c.opts.Durable {
		c.t.Fatalf("restart %s: in-memory nodes cannot restart with their state", c.ID(i))
	}
	if err := c.TryLaunch(i); err != nil {
		c.t.Fatal(err)
	}
}

// Launch starts node i, which is down: the first start of a Deferred node,
// or a restart (with its data dir, if any).
func (c *Cluster) Launch(i int) {
	c.t.Helper()
	if err := c.TryLaunch(i); err != nil {
		c.t.Fatal(err)
	}
}

// TryLaunch is Launch returning node.Start's error (the node stays down).
func (c *Cluster) TryLaunch(i int) error {
	if c.Nodes[i] != nil {
		return fmt.Errorf("launch %s: still running", c.ID(i))
	}
	ln, err := c.tryListen(i, c.cfgs[i].AdvertiseAddr)
	if err != nil {
		return fmt.Errorf("launch %s: %w", c.ID(i), err)
	}
	n, err := c.tryStart(i, ln)
	if err != nil {
		return fmt.Errorf("launch %s: %w", c.ID(i), err)
	}
	c.Nodes[i] = n
	return nil
}

// Wipe deletes node i's data dir (amnesia: a replaced disk, an emptyDir
// volume); the node must be down. It keeps its id, address and config, so
// the next Launch starts it as itself without its state.
func (c *Cluster) Wipe(i int) {
	c.t.Helper()
	if c.Nodes[i] != nil {
		c.t.Fatalf("wipe %s: still running", c.ID(i))
	}
	if c.dirs[i] == "" {
		return
	}
	if err := os.RemoveAll(c.dirs[i]); err != nil {
		c.t.Fatalf("wipe %s: %v", c.ID(i), err)
	}
}

// Reconfigure changes node i's config for its next Launch (e.g. other Join
// seeds); the node must be down.
func (c *Cluster) Reconfigure(i int, change func(cfg *node.Config)) {
	c.t.Helper()
	if c.Nodes[i] != nil {
		c.t.Fatalf("reconfigure %s: still running", c.ID(i))
	}
	change(&c.cfgs[i])
}

// stopBound bounds one stop: 100 election timeouts, and at least 30 s on a
// real loopback network (a loaded CI machine is slow; fake time is not).
func (c *Cluster) stopBound() time.Duration {
	bound := 100 * c.opts.Timing.ElectionTimeout
	if c.opts.Net == nil && bound < 30*time.Second {
		bound = 30 * time.Second
	}
	return bound
}

// Close stops every running node (registered with t.Cleanup by Start).
func (c *Cluster) Close() {
	for i := range c.Nodes {
		if n := c.Nodes[i]; n != nil {
			c.Nodes[i] = nil
			ctx, cancel := context.WithTimeout(context.Background(), c.stopBound())
			nodeopts.Kill(ctx, n)
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
			wait = max(wait, 2*cfg.Gossip.Timing.TCPTimeout)
		}
		time.Sleep(wait)
	}
}
