package node_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/replica"
	"github.com/raftlock/raftlock/internal/testing/clustertest"
	"github.com/raftlock/raftlock/internal/testing/memnet"
	"github.com/raftlock/raftlock/node"
)

// waitClusterVersion waits until every running node has applied cluster
// version v.
func waitClusterVersion(t *testing.T, c *clustertest.Cluster, v uint64) {
	t.Helper()
	c.WaitClusterVersion(v, 10*time.Second)
}

// readyCluster starts a cluster on a fresh memnet (3 nodes unless
// opts.Nodes says otherwise) and waits for a leader, every node ready and
// the highest cluster version; it returns the leader's index.
func readyCluster(t *testing.T, opts clustertest.Options) (*clustertest.Cluster, int) {
	t.Helper()
	if opts.Net == nil {
		opts.Net = memnet.New()
	}
	c := clustertest.Start(t, opts)
	c.WaitLeader(10 * time.Second)
	c.WaitReady(10 * time.Second)
	waitClusterVersion(t, c, fsm.MaxClusterVersion)
	return c, c.WaitLeader(time.Second)
}

// mustApply applies cmd through n and checks the result's status.
func mustApply(t *testing.T, n *node.Node, cmd fsm.Command, want fsmwire.Status) fsm.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := replica.Of(n).Apply(ctx, cmd)
	if err != nil || r.Status != want {
		t.Fatalf("%T%+v: %v %+v, want %v", cmd, cmd, err, r, want)
	}
	return r
}

// redeliver hands the leader a forwarded apply request again — the bytes a
// follower sent on a connection that stalled past AttemptTimeout and
// delivers them only now — and returns the result.
func redeliver(t *testing.T, leader *node.Node, cmd fsm.Command) fsm.Result {
	t.Helper()
	req, err := node.EncodeApplyRequest([]fsm.Command{cmd})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	reply, err := node.HandleRPC(ctx, leader, req)
	if err != nil {
		t.Fatalf("handler: %v", err)
	}
	res, errs, err := node.DecodeApplyReply(reply, 1)
	if err != nil || errs[0] != nil {
		t.Fatalf("reply: %v %v", err, errs)
	}
	return res[0]
}

// Issue 14 #1, node level: a forwarded Acquire delivered again after the
// client released its grant creates no holder (the ghost holder).
func TestForwardedAcquireDeliveredAgainAfterReleaseCreatesNoHolder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, leader := readyCluster(t, clustertest.Options{})
		ctx := context.Background()
		f := c.Nodes[c.Follower(leader)]
		s := openSession(t, ctx, f, time.Minute)
		o := newOwner()
		acq := fsm.Acquire{Session: s, Lock: "x", Owner: o, Seq: 1, AckBelow: 1}
		mustApply(t, f, acq, fsmwire.StatusGranted)
		mustApply(t, f, fsm.Release{Session: s, Lock: "x", Owner: o, Seq: 2, AckBelow: 2}, fsmwire.StatusOK)
		if r := redeliver(t, c.Nodes[leader], acq); r.Status == fsmwire.StatusGranted || r.Status == fsmwire.StatusQueued {
			t.Fatalf("the delayed duplicate was applied again: %+v", r)
		}
		for _, n := range c.Nodes {
			if err := n.Sync(ctx); err != nil {
				t.Fatal(err)
			}
			if h, ok := n.Holder("x"); ok {
				t.Fatalf("%s: ghost holder %+v", n.ID(), h)
			}
		}
	})
}

// A withdrawn Lock (queued, then dequeued) whose Acquire is delivered again
// is not queued again.
func TestForwardedWaitDeliveredAgainAfterWithdrawIsNotRequeued(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, leader := readyCluster(t, clustertest.Options{})
		ctx := context.Background()
		f := c.Nodes[c.Follower(leader)]
		holder := openSession(t, ctx, f, time.Minute)
		mustApply(t, f, fsm.Acquire{Session: holder, Lock: "x", Owner: newOwner()}, fsmwire.StatusGranted)
		s := openSession(t, ctx, f, time.Minute)
		o := newOwner()
		wait := fsm.Acquire{Session: s, Lock: "x", Owner: o, Wait: true, Seq: 1, AckBelow: 1}
		mustApply(t, f, wait, fsmwire.StatusQueued)
		mustApply(t, f, fsm.Release{Session: s, Lock: "x", Owner: o, Seq: 2, AckBelow: 2}, fsmwire.StatusOK)
		if r := redeliver(t, c.Nodes[leader], wait); r.Status == fsmwire.StatusQueued {
			t.Fatalf("the delayed duplicate queued again: %+v", r)
		}
		if err := f.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		if li, _ := f.Lock("x"); len(li.Waiters) != 0 {
			t.Fatalf("re-queued: %+v", li.Waiters)
		}
	})
}
