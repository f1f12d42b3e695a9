package node_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/devcerts"
	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/replica"
	"github.com/raftlock/raftlock/internal/testing/clustertest"
	"github.com/raftlock/raftlock/node"
)

// Over real TCP with mutual TLS: the cluster works; a node whose certificate
// comes from another CA cannot take part (it never learns a leader and its
// callers get ErrNoQuorum), while the two good nodes form a quorum.
func TestMutualTLSCluster(t *testing.T) {
	ca, err := devcerts.NewCA("raftlock-test")
	if err != nil {
		t.Fatal(err)
	}
	rogue, err := devcerts.NewCA("rogue")
	if err != nil {
		t.Fatal(err)
	}
	c := clustertest.Start(t, clustertest.Options{Nodes: 3, Durable: true, Configure: func(i int, cfg *node.Config) {
		issuer := ca
		if i == 2 {
			issuer = rogue
		}
		tc, err := issuer.MutualTLS(clustertest.ID(i))
		if err != nil {
			t.Fatal(err)
		}
		cfg.TLS = tc
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	good := []*node.Node{c.Nodes[0], c.Nodes[1]}
	for _, n := range good {
		if err := n.WaitReady(ctx); err != nil {
			t.Fatalf("%s: %v", n.ID(), err)
		}
	}
	s := openSession(t, ctx, good[1], time.Minute)
	if r, err := replica.Of(good[0]).Apply(ctx, fsm.Acquire{Session: s, Lock: "l", Owner: newOwner()}); err != nil || r.Status != fsmwire.StatusGranted {
		t.Fatalf("acquire over TLS: %v %+v", err, r)
	}

	bad := c.Nodes[2]
	if st := bad.Status(); st.LeaderID != "" || st.AppliedIndex > 1 {
		t.Fatalf("node with a foreign certificate took part: %+v", st)
	}
	actx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if _, err := replica.Of(bad).Apply(actx, fsm.OpenSession{TTL: time.Minute}); !errors.Is(err, node.ErrNoQuorum) {
		t.Fatalf("apply on the rogue node: %v", err)
	}
	if _, ok := bad.Holder("l"); ok {
		t.Fatal("rogue node learned the lock table")
	}
}
