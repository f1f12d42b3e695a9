package node_test

import (
	"context"
	"reflect"
	"testing"
	"testing/synctest"

	"github.com/raftlock/raftlock/internal/replica"
	"github.com/raftlock/raftlock/internal/testing/clustertest"
	"github.com/raftlock/raftlock/node"
)

// TestReplicaOf: replica.Of turns a started node into its Replica (the
// same node: its id, its timeouts, its applied index) and anything else
// into nil; the plumbing it carries is no exported method of Node's.
func TestReplicaOf(t *testing.T) {
	for _, v := range []any{nil, (*node.Node)(nil), "not a node", node.Node{}} {
		if r := replica.Of(v); r != nil {
			t.Errorf("replica.Of(%T) = %v, want nil", v, r)
		}
		if s := replica.ServerOf(v); s != nil {
			t.Errorf("replica.ServerOf(%T) = %v, want nil", v, s)
		}
	}
	for _, m := range []string{"Propose", "Apply", "WaitApplied", "AppliedIndex", "KeepAlive", "Subscribe",
		"LockAt", "Owner", "SessionAcquisitions", "Logger", "Digest", "LeasesLeft"} {
		if _, ok := reflect.TypeFor[*node.Node]().MethodByName(m); ok {
			t.Errorf("*node.Node exports %s: lockapi's plumbing goes through internal/replica", m)
		}
	}
	synctest.Test(t, func(t *testing.T) {
		c, _ := readyCluster(t, clustertest.Options{Nodes: 1})
		n := c.Nodes[0]
		r := replica.Of(n)
		if r == nil {
			t.Fatal("replica.Of(started node) = nil")
		}
		if r.ID() != n.ID() {
			t.Errorf("ID %q, want %q", r.ID(), n.ID())
		}
		hb, el := r.Timeouts()
		if tm := n.Timing(); hb != tm.HeartbeatTimeout || el != tm.ElectionTimeout {
			t.Errorf("Timeouts %v %v, want %v %v", hb, el, tm.HeartbeatTimeout, tm.ElectionTimeout)
		}
		if err := r.Sync(context.Background()); err != nil {
			t.Fatal(err)
		}
		if idx, _ := replica.ServerOf(n).Digest(); idx != r.AppliedIndex() || idx == 0 {
			t.Errorf("digest at %d, applied index %d", idx, r.AppliedIndex())
		}
	})
}
