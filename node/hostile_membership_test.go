package node_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/raftlock/raftlock/internal/devcerts"
	"github.com/raftlock/raftlock/internal/testing/clustertest"
	"github.com/raftlock/raftlock/internal/testing/memnet"
	"github.com/raftlock/raftlock/node"
)

// fakeMember is a bare memberlist instance that claims to be a raftlock
// member: made-up metadata, no Raft behind its address.
type fakeMember struct{ meta []byte }

func (f fakeMember) NodeMeta(int) []byte                  { return f.meta }
func (fakeMember) NotifyMsg([]byte)                       {}
func (fakeMember) GetBroadcasts(int, int) [][]byte        { return nil }
func (fakeMember) LocalState(bool) []byte                 { return nil }
func (fakeMember) MergeRemoteState(buf []byte, join bool) {}

func startFake(t *testing.T, id, raftAddr string, seed string) *memberlist.Memberlist {
	t.Helper()
	meta, _ := json.Marshal(map[string]any{"v": 1, "wire": 1, "id": id, "addr": raftAddr, "state": true})
	mc := memberlist.DefaultLANConfig()
	mc.Name, mc.BindAddr, mc.BindPort, mc.AdvertiseAddr = id, "127.0.0.1", 0, "127.0.0.1"
	mc.Delegate = fakeMember{meta: meta}
	mc.Logger = log.New(io.Discard, "", 0)
	lt := clustertest.LoopbackGossipTiming()
	mc.ProbeInterval, mc.ProbeTimeout, mc.GossipInterval, mc.PushPullInterval = lt.ProbeInterval, lt.ProbeTimeout, lt.GossipInterval, lt.PushPullInterval
	ml, err := memberlist.Create(mc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ml.Shutdown() })
	if _, err := ml.Join([]string{seed}); err != nil {
		t.Fatal(err)
	}
	return ml
}

// Issue 20 #1. With mutual TLS on and gossip unencrypted, strangers on the
// gossip port claimed membership: two bare memberlist instances with
// made-up metadata became voters (the configuration was {evil1, evil2, n1,
// n2, n3}), and a node whose certificate (signed by the cluster's CA) names
// another node was added under the id it claimed. Required: membership
// changes only for members whose identity is proven — the leader reaches
// the member's Raft address over mutual TLS and its certificate names the
// member id.
func TestHostileGossipStrangersNeverMembers(t *testing.T) {
	ca, err := devcerts.NewCA("raftlock-test")
	if err != nil {
		t.Fatal(err)
	}
	c := clustertest.Start(t, clustertest.Options{Nodes: 3, Gossip: true, Configure: func(i int, cfg *node.Config) {
		tc, err := ca.MutualTLS(cfg.ID)
		if err != nil {
			t.Fatal(err)
		}
		cfg.TLS = tc
		cfg.Gossip.AllowUnencrypted = true
	}})
	c.WaitLeader(30 * time.Second)
	seed := c.Nodes[0].GossipAddr()
	startFake(t, "evil1", "127.0.0.1:1", seed)
	startFake(t, "evil2", "127.0.0.1:2", seed)
	// A real replica with a valid certificate for "honest", claiming "evil3".
	c.Add(func(cfg *node.Config) {
		cfg.ID, cfg.BootstrapExpect = "evil3", 0
		tc, err := ca.MutualTLS("honest")
		if err != nil {
			t.Fatal(err)
		}
		cfg.TLS = tc
		cfg.Gossip.AllowUnencrypted = true
		cfg.Gossip.Join = []string{seed}
	})
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		for _, n := range c.Nodes {
			if n == nil {
				continue
			}
			for _, s := range n.Status().Servers {
				if strings.HasPrefix(s.ID, "evil") {
					t.Fatalf("%s: stranger %s made a %s: %s", n.ID(), s.ID, s.Role, fmtRoles(servers(n)))
				}
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	// The cluster still works (a generous bound: this test runs on real
	// time, with TLS, on a shared machine).
	if _, err := grant(c.Nodes[0], "after-strangers", 30*time.Second); err != nil {
		t.Fatalf("no grant after the strangers: %v", err)
	}
}

// The control: a new member whose certificate names it is added (as a
// non-voter) to a mutual-TLS cluster.
func TestTLSMemberWithItsCertificateAdded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ca, err := devcerts.NewCA("raftlock-test")
		if err != nil {
			t.Fatal(err)
		}
		key := bytes.Repeat([]byte{9}, 16)
		tlsFor := func(cfg *node.Config) {
			tc, err := ca.MutualTLS(cfg.ID)
			if err != nil {
				t.Fatal(err)
			}
			tc.ServerName = "raftlock" // memnet hosts are not in the certificate
			cfg.TLS, cfg.Gossip.Key = tc, key
		}
		c := clustertest.Start(t, clustertest.Options{Nodes: 3, Net: memnet.New(), Gossip: true, Configure: func(i int, cfg *node.Config) { tlsFor(cfg) }})
		l := c.WaitLeader(20 * time.Second)
		four := c.Add(func(cfg *node.Config) { cfg.BootstrapExpect = 0; tlsFor(cfg) })
		c.Eventually(30*time.Second, func() (bool, string) {
			return roleOf(c.Nodes[l], clustertest.ID(four)) == node.RoleNonvoter, "n4 not added: " + servers5(c.Nodes[l])
		})
	})
}
