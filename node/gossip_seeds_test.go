package node_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raftlock/raftlock/internal/testing/clustertest"
	"github.com/raftlock/raftlock/internal/testing/memnet"
	"github.com/raftlock/raftlock/node"
)

// A new node whose seeds are all gone (the members at those addresses were
// replaced) finds no cluster: nothing else knows of it and it knows no
// other address. Its Status says so — no seed reachable, and which
// addresses it tried — and WaitReady, when its context ends, says the same
// instead of a bare "no quorum". It goes on trying its seeds: once a member
// gossips at one of those addresses again, it joins and becomes ready.
func TestGossipNoSeedReachable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := gossipCluster(t, 3, nil)
		waitServers(t, c, 10*time.Second, voters("n1", "n2", "n3"))
		// Nobody gossips at node 4's or node 5's address yet: the new
		// node is node 3 (n4); node 4 (n5) is added later.
		seeds := []string{clustertest.GossipAddr(5), clustertest.GossipAddr(4)}
		n, err := c.TryAdd(func(cfg *node.Config) {
			cfg.BootstrapExpect = 0 // a joiner
			cfg.Gossip.Join = seeds
		})
		if err != nil {
			t.Fatal(err)
		}
		c.Eventually(10*time.Second, func() (bool, string) {
			return n.Status().GossipErr != "", "no gossip error on " + n.ID()
		})
		st := n.Status()
		if !strings.HasPrefix(st.GossipErr, "no seed reachable") {
			t.Errorf("GossipErr %q, want it to start with \"no seed reachable\"", st.GossipErr)
		}
		for _, s := range seeds {
			if !strings.Contains(st.GossipErr, s) {
				t.Errorf("GossipErr %q does not name the seed %s", st.GossipErr, s)
			}
		}
		if len(st.Members) != 1 || len(st.Servers) != 0 || st.LeaderID != "" {
			t.Fatalf("%s found a cluster through no seed: members %s, servers %v, leader %q", n.ID(), fmtMembers(st.Members), st.Servers, st.LeaderID)
		}

		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err = n.WaitReady(ctx)
		cancel()
		t.Logf("%s: Status.GossipErr %q; WaitReady: %v", n.ID(), st.GossipErr, err)
		switch {
		case err == nil:
			t.Fatalf("%s ready without a cluster", n.ID())
		case !errors.Is(err, node.ErrNoQuorum) || !errors.Is(err, context.DeadlineExceeded):
			t.Errorf("WaitReady: %v, want ErrNoQuorum and the deadline", err)
		case !strings.Contains(err.Error(), "no seed reachable") || !strings.Contains(err.Error(), seeds[0]) || !strings.Contains(err.Error(), seeds[1]):
			t.Errorf("WaitReady: %q does not say that no seed was reachable, and which", err)
		}
		for _, m := range c.Nodes[:3] {
			if s := memberState(m, n.ID()); s != "" {
				t.Fatalf("%s lists %s as %q", m.ID(), n.ID(), s)
			}
		}
		if t.Failed() {
			t.FailNow()
		}

		// A member starts at one of the seed addresses: the node's next
		// attempt reaches it, it joins and is added.
		c.Add(nil)
		ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := n.WaitReady(ctx); err != nil {
			t.Fatalf("%s once a seed is back: %v", n.ID(), err)
		}
		c.Eventually(10*time.Second, func() (bool, string) {
			_, in := servers(c.Nodes[0])[n.ID()]
			return in && n.Status().GossipErr == "", "n1 configuration " + fmtRoles(servers(c.Nodes[0])) + ", gossip error " + n.Status().GossipErr
		})
	})
}

// A member restarted while its only seed is down finds its cluster through
// the members it remembers (known peers). It is in the gossip cluster then,
// and its Status carries no gossip error, though its seed still does not
// answer: GossipErr says why a node is not in the gossip cluster, and an
// operator must not be sent after a healthy node.
func TestGossipRestartWithSeedDownReportsNoError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Node i joins through node i+1 (mod 3): n1's only seed is n2.
		c := clustertest.Start(t, clustertest.Options{Nodes: 3, Net: memnet.New(), Gossip: true, Durable: true})
		waitServers(t, c, 20*time.Second, voters("n1", "n2", "n3"))
		c.WaitReady(10 * time.Second)
		time.Sleep(10 * time.Second) // the known peers are saved
		c.Crash(0)
		c.Crash(1)
		c.Restart(0)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := c.Nodes[0].WaitReady(ctx); err != nil {
			t.Fatalf("n1 restarted with its seed n2 down: %v", err)
		}
		c.Eventually(10*time.Second, func() (bool, string) {
			st := c.Nodes[0].Status()
			return memberState(c.Nodes[0], "n3") == node.MemberAlive && st.GossipErr == "",
				"n1 members " + fmtMembers(st.Members) + ", gossip error " + st.GossipErr
		})
		time.Sleep(5 * time.Second) // many more join attempts through the dead seed
		if st := c.Nodes[0].Status(); st.GossipErr != "" {
			t.Fatalf("n1, in the gossip cluster with n3, reports a gossip error: %q", st.GossipErr)
		}
	})
}
