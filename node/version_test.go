package node_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/nodeopts"
	"github.com/raftlock/raftlock/internal/replica"
	"github.com/raftlock/raftlock/internal/testing/clustertest"
	"github.com/raftlock/raftlock/internal/testing/memnet"
	"github.com/raftlock/raftlock/node"
	"github.com/raftlock/raftlock/transport"
)

// Issue 14 #5: the cluster version rises only once every server supports
// it. With one server reporting the previous release's version (1), the
// leader writes only version-1 entries — exactly-once and quotas are off, as
// the previous release applies commands — and forwarded requests of both
// versions are accepted; once that server is replaced by one of this
// release, the version rises and both switch on.
func TestClusterVersionWaitsForEveryServer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		old := 2
		var oldMax atomic.Uint64
		oldMax.Store(1)
		c := clustertest.Start(t, clustertest.Options{Nodes: 3, Net: memnet.New(), Configure: func(i int, cfg *node.Config) {
			if i == old {
				nodeopts.Hooks(cfg).MaxClusterVersion = oldMax.Load
			}
		}})
		li := c.WaitLeader(10 * time.Second)
		c.WaitReady(10 * time.Second)
		ctx := context.Background()
		time.Sleep(10 * time.Second) // several version checks
		for _, n := range c.Nodes {
			if st := n.Status(); st.ClusterVersion != 1 {
				t.Fatalf("%s at cluster version %d with a server of version 1", n.ID(), st.ClusterVersion)
			}
		}
		leader := c.Nodes[li]
		if got := c.Nodes[old].Status().MaxClusterVersion; got != 1 {
			t.Fatalf("the old server supports %d", got)
		}
		// Version 1 rules: a redelivered acquire after the release is applied
		// again (no request numbers are written), quotas are not set.
		s := openSession(t, ctx, leader, time.Minute)
		o := newOwner()
		acq := fsm.Acquire{Session: s, Lock: "x", Owner: o, Seq: 1, AckBelow: 1}
		if r, err := replica.Of(leader).Apply(ctx, acq); err != nil || r.Status != fsmwire.StatusGranted {
			t.Fatalf("acquire: %v %+v", err, r)
		}
		replica.Of(leader).Apply(ctx, fsm.Release{Session: s, Lock: "x", Owner: o, Seq: 2, AckBelow: 2})
		if r := redeliver(t, leader, acq); r.Status != fsmwire.StatusGranted {
			t.Fatalf("at version 1 the previous release's rules apply; got %+v", r)
		}
		replica.Of(leader).Apply(ctx, fsm.Release{Lock: "x", Owner: o})
		if _, err := node.ProposeAsLeader(ctx, leader, fsm.EndDelay{}); !errors.Is(err, node.ErrInvalidArgument) {
			t.Fatalf("a version-2 command at version 1: %v", err)
		}
		if lim := leader.Status().Limits; lim != (fsm.Limits{}) {
			t.Fatalf("quotas set at version 1: %+v", lim)
		}
		// The "old" server is upgraded to this release.
		oldMax.Store(0)
		waitClusterVersion(t, c, fsm.MaxClusterVersion)
		c.Eventually(10*time.Second, func() (bool, string) {
			return leader.Status().Limits == fsm.DefaultLimits(), "quotas not proposed"
		})
		li = c.WaitLeader(time.Second)
		leader = c.Nodes[li]
		s = openSession(t, ctx, leader, time.Minute)
		acq = fsm.Acquire{Session: s, Lock: "y", Owner: o, Seq: 1, AckBelow: 1}
		replica.Of(leader).Apply(ctx, acq)
		replica.Of(leader).Apply(ctx, fsm.Release{Session: s, Lock: "y", Owner: o, Seq: 2, AckBelow: 2})
		if r := redeliver(t, leader, acq); r.Status != fsmwire.StatusStale {
			t.Fatalf("at version 2 the duplicate is stale; got %+v", r)
		}
		// The leader reads forwarded requests of both versions.
		v1 := fsm.Acquire{Session: s, Lock: "z", Owner: newOwner()}
		if r := redeliver(t, leader, v1); r.Status != fsmwire.StatusGranted {
			t.Fatalf("a version-1 request: %+v", r)
		}
	})
}

// The peer-info RPC tells who a server is and where it stands; a server of
// the previous release, which does not know the request, counts as version 1.
func TestPeerInfo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := memnet.New()
		c, li := readyCluster(t, clustertest.Options{Net: net})
		ctx := context.Background()
		f := c.Follower(li)
		info, err := node.AskPeerInfo(ctx, c.Nodes[li], c.Nodes[f].Addr())
		if err != nil {
			t.Fatal(err)
		}
		st := c.Nodes[f].Status()
		if info.Legacy || info.NodeID != clustertest.ID(f) || info.RaftID != st.RaftID || info.MaxVersion != fsm.MaxClusterVersion ||
			info.ClusterVersion != fsm.MaxClusterVersion || info.State != "follower" || info.Term != st.Term || info.AppliedIndex == 0 || info.Halted != "" {
			t.Fatalf("peer info %+v (status %+v)", info, st)
		}
		// A server of the previous release answers with an error.
		ln, err := net.Host("old").Listen("old:7400")
		if err != nil {
			t.Fatal(err)
		}
		oldSrv, err := transport.New(transport.Config{Listener: ln, Dialer: net.Host("old").Dial},
			transport.HandlerFunc(func(ctx context.Context, from string, req []byte) ([]byte, error) {
				return nil, errors.New("node: malformed message: unknown request kind 5")
			}))
		if err != nil {
			t.Fatal(err)
		}
		defer oldSrv.Close()
		if info, err := node.AskPeerInfo(ctx, c.Nodes[li], "old:7400"); err != nil || !info.Legacy || info.MaxVersion != 1 {
			t.Fatalf("previous release: %+v %v", info, err)
		}
		if _, err := node.AskPeerInfo(ctx, c.Nodes[li], "nobody:7400"); err == nil {
			t.Fatal("an unreachable server answered")
		} else if !strings.Contains(err.Error(), "nobody") {
			t.Fatalf("error %v does not name the server", err)
		}
	})
}
