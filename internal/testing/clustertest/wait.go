package clustertest

import (
	"context"
	"fmt"
	"time"

	"github.com/raftlock/raftlock/fsm"
)

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
		if n != nil && n.Status().LeaderID != c.ID(leader) {
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
			c.t.Fatalf("%s not ready: %v (%s)", c.ID(i), err, c.describe())
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

// WaitLimits waits until every running node applies the quotas lim (which
// the leader proposes from its configuration).
func (c *Cluster) WaitLimits(lim fsm.Limits, timeout time.Duration) {
	c.t.Helper()
	c.Eventually(timeout, func() (bool, string) {
		for i, n := range c.Nodes {
			if n != nil && n.Status().Limits != lim {
				return false, fmt.Sprintf("%s has the quotas %+v, want %+v", c.ID(i), n.Status().Limits, lim)
			}
		}
		return true, ""
	})
}

// WaitClusterVersion waits until every running node applies cluster version
// v (exactly: a cluster held below its highest version stays there).
func (c *Cluster) WaitClusterVersion(v uint64, timeout time.Duration) {
	c.t.Helper()
	c.Eventually(timeout, func() (bool, string) {
		for i, n := range c.Nodes {
			if n == nil {
				continue
			}
			if got := n.Status().ClusterVersion; got != v {
				return false, fmt.Sprintf("%s at cluster version %d, want %d", c.ID(i), got, v)
			}
		}
		return true, ""
	})
}
