package node_test

import (
	"bytes"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raftlock/raftlock/internal/devcerts"
	"github.com/raftlock/raftlock/internal/testing/clustertest"
	"github.com/raftlock/raftlock/internal/testing/memnet"
	"github.com/raftlock/raftlock/node"
)

// roleOf returns member id's role in n's configuration ("" if absent).
func roleOf(n *node.Node, id string) node.Role {
	for _, s := range n.Status().Servers {
		if s.ID == id {
			return s.Role
		}
	}
	return ""
}

func voterCount(n *node.Node) int {
	v := 0
	for _, s := range n.Status().Servers {
		if s.Role == node.RoleVoter {
			v++
		}
	}
	return v
}

// Issue 13 #4. A replica started with mutual TLS joins, through gossip, a
// cluster without TLS. Before the fix the leader made it a fourth voter it
// could never reach, so that losing one healthy replica lost the quorum
// with three of four processes up. Required: a member that cannot be
// reached over Raft is never made a voter, and the cluster survives the
// loss of one healthy replica.
func TestSafetyUnreachableMemberNeverVoter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		key := bytes.Repeat([]byte{5}, 16)
		c := clustertest.Start(t, clustertest.Options{Nodes: 3, Net: memnet.New(), Gossip: true, Configure: func(i int, cfg *node.Config) { cfg.Gossip.Key = key }})
		l := c.WaitLeader(20 * time.Second)
		c.WaitReady(20 * time.Second)
		ca, err := devcerts.NewCA("raftlock-test")
		if err != nil {
			t.Fatal(err)
		}
		tlsNode := c.Add(func(cfg *node.Config) {
			cfg.BootstrapExpect = 0
			tc, err := ca.MutualTLS(cfg.ID)
			if err != nil {
				t.Fatal(err)
			}
			cfg.TLS = tc
		})
		time.Sleep(30 * time.Second) // well past any stabilization time
		if r := roleOf(c.Nodes[l], clustertest.ID(tlsNode)); r == node.RoleVoter {
			t.Fatalf("the unreachable TLS member was made a voter: %s", servers5(c.Nodes[l]))
		}
		c.Crash((l + 1) % 3)
		if tok := tryGrant(c.Nodes[l], "x", 10*time.Second); tok == 0 {
			t.Fatalf("no grant after losing one healthy replica of four: %s", servers5(c.Nodes[l]))
		}
	})
}

// Issue 13 #4, odd counts. A fourth healthy replica does not make a fourth
// voter (an even count tolerates no more failures than three and needs a
// larger quorum); a fifth makes five.
func TestSafetyVoterCountStaysOdd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := clustertest.Start(t, clustertest.Options{Nodes: 3, Net: memnet.New(), Gossip: true})
		l := c.WaitLeader(20 * time.Second)
		c.Add(func(cfg *node.Config) { cfg.BootstrapExpect = 0 })
		time.Sleep(30 * time.Second)
		if v := voterCount(c.Nodes[l]); v != 3 || len(c.Nodes[l].Status().Servers) != 4 {
			t.Fatalf("four members: %d voters (want 3 voters and a non-voter): %s", v, servers5(c.Nodes[l]))
		}
		c.Add(func(cfg *node.Config) { cfg.BootstrapExpect = 0 })
		c.Eventually(60*time.Second, func() (bool, string) {
			return voterCount(c.Nodes[l]) == 5, "five members: " + servers5(c.Nodes[l])
		})
	})
}
