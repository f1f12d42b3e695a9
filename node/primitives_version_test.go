package node_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/lockinfo"
	"github.com/raftlock/raftlock/internal/nodeopts"
	"github.com/raftlock/raftlock/internal/replica"
	"github.com/raftlock/raftlock/internal/testing/clustertest"
	"github.com/raftlock/raftlock/internal/testing/memnet"
	"github.com/raftlock/raftlock/node"
)

// The commands of cluster version 3 (read grants, semaphores, values,
// SetValue, RaiseTokens) wait for every server to support version 3: while
// one server supports only 2, the cluster stays at 2, they are refused on
// the leader and through a follower alike — and what version 2 allows (the
// quotas) is in force meanwhile. Once that server is upgraded the version
// rises, the new leader raises the token counter to its clock, and the
// commands work.
// startWithOldServer starts a 3-node cluster on memnet whose third server
// supports cluster versions up to max (0: this binary's), and waits until
// the cluster is ready at version max.
func startWithOldServer(t *testing.T, max *atomic.Uint64) *clustertest.Cluster {
	t.Helper()
	c := clustertest.Start(t, clustertest.Options{Nodes: 3, Net: memnet.New(), Configure: func(i int, cfg *node.Config) {
		if i == 2 {
			nodeopts.Hooks(cfg).MaxClusterVersion = max.Load
		}
	}})
	c.WaitLeader(10 * time.Second)
	c.WaitReady(10 * time.Second)
	waitClusterVersion(t, c, max.Load())
	return c
}

func TestPrimitivesWaitForClusterVersion3(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var oldMax atomic.Uint64
		oldMax.Store(2)
		c := startWithOldServer(t, &oldMax)
		time.Sleep(10 * time.Second) // several version checks
		li := c.WaitLeader(time.Second)
		leader := c.Nodes[li]
		if v := leader.Status().ClusterVersion; v != 2 {
			t.Fatalf("cluster version %d with a server of version 2", v)
		}
		c.Eventually(10*time.Second, func() (bool, string) {
			// The limits of version 4 wait for version 4.
			return leader.Status().Limits == fsm.Downgrade(fsm.SetLimits{Limits: fsm.DefaultLimits()}, 2).(fsm.SetLimits).Limits,
				"quotas not proposed at version 2"
		})
		ctx := context.Background()
		s := openSession(t, ctx, leader, time.Minute)
		before := leader.Stats()
		for _, n := range []*node.Node{leader, c.Nodes[c.Follower(li)]} {
			for _, cmd := range []fsm.Command{
				fsm.Acquire{Session: s, Lock: "rw", Owner: newOwner(), Shared: true},
				fsm.Acquire{Session: s, Lock: "pool", Owner: newOwner(), Limit: 4, Permits: 1},
				fsm.Acquire{Session: s, Lock: "v", Owner: newOwner(), Value: "x"},
				fsm.SetValue{Session: s, Lock: "v", Owner: newOwner(), Value: "x"},
			} {
				cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				_, err := replica.Of(n).Apply(cctx, cmd)
				cancel()
				if !errors.Is(err, node.ErrInvalidArgument) {
					t.Fatalf("%s: %T at cluster version 2: %v", n.ID(), cmd, err)
				}
			}
		}
		if _, err := node.ProposeAsLeader(ctx, leader, fsm.RaiseTokens{}); !errors.Is(err, node.ErrInvalidArgument) {
			t.Fatalf("RaiseTokens at version 2: %v", err)
		}
		if after := leader.Stats(); after.LastToken != before.LastToken || after.Locks != 0 {
			t.Fatalf("refused commands changed the state: %+v", after)
		}

		oldMax.Store(0) // upgraded
		waitClusterVersion(t, c, fsm.MaxClusterVersion)
		c.Eventually(10*time.Second, func() (bool, string) {
			return uint64(leader.Stats().LastToken) >= uint64(time.Now().Add(-time.Minute).UnixMicro()), "token counter not raised"
		})
		floor := leader.Stats().LastToken
		r, err := replica.Of(leader).Apply(ctx, fsm.Acquire{Session: s, Lock: "rw", Owner: newOwner(), Shared: true, Value: "reader"})
		if err != nil || r.Status != fsmwire.StatusGranted || r.Token <= floor {
			t.Fatalf("read grant at version 3: %v %+v (floor %d)", err, r, floor)
		}
		f := c.Nodes[c.Follower(li)]
		if r, err := replica.Of(f).Apply(ctx, fsm.Acquire{Session: s, Lock: "pool", Owner: newOwner(), Limit: 4, Permits: 3}); err != nil || r.Status != fsmwire.StatusGranted {
			t.Fatalf("semaphore through a follower: %v %+v", err, r)
		}
		if li, _, ok := replica.Of(f).LockAt("pool"); !ok || li.Used != 3 || li.Limit != 4 {
			t.Fatalf("semaphore on the follower: %+v", li)
		}
	})
}

// Issue 17 #4: a fence keeps the highest token it accepted. A cluster
// rebuilt from empty data dirs later must grant tokens above it, without
// operator action.
func TestTokensKeepIncreasingAcrossARebuiltCluster(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		grantOnce := func(lock string) lockinfo.Token {
			c, li := readyCluster(t, clustertest.Options{})
			defer c.Close()
			ctx := context.Background()
			leader := c.Nodes[li]
			c.Eventually(10*time.Second, func() (bool, string) {
				return leader.Stats().LastToken > 1_000_000, "token counter not raised"
			})
			s := openSession(t, ctx, leader, time.Minute)
			var last lockinfo.Token
			for range 100 {
				o := newOwner()
				r := mustApply(t, leader, fsm.Acquire{Session: s, Lock: lock, Owner: o}, fsmwire.StatusGranted)
				mustApply(t, leader, fsm.Release{Lock: lock, Owner: o}, fsmwire.StatusOK)
				last = r.Token
			}
			return last
		}
		fenced := grantOnce("invoice:842") // the fence remembers this
		time.Sleep(time.Second)            // rebuilt a second later, from nothing
		if first := grantOnce("invoice:842"); first <= fenced {
			t.Fatalf("the rebuilt cluster granted token %d, the fence holds %d: every write would be refused", first, fenced)
		}
	})
}
