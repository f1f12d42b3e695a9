package node_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/raftlock/raftlock/internal/nodeopts"
	"github.com/raftlock/raftlock/internal/testing/clustertest"
	"github.com/raftlock/raftlock/internal/testing/memnet"
	"github.com/raftlock/raftlock/node"
)

// Every labelled series of the node's metrics exists from the start (at
// zero), so that dashboards and rate() see them before the first event
// (issue 16: they were absent until then).
func TestLabelledMetricsExistFromTheStart(t *testing.T) {
	reg := prometheus.NewRegistry()
	cfg := node.DefaultConfig()
	cfg.ID, cfg.InMemory, cfg.Bootstrap = "m", true, true
	cfg.BindAddr, cfg.Timing, cfg.Registerer = "127.0.0.1:0", nodeopts.TestTiming(), reg
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := node.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close(context.Background())
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	series := map[string]map[string]bool{} // family → label value pairs
	for _, f := range fams {
		series[f.GetName()] = map[string]bool{}
		for _, m := range f.GetMetric() {
			key := ""
			for _, l := range m.GetLabel() {
				key += l.GetName() + "=" + l.GetValue() + ","
			}
			series[f.GetName()][key] = true
		}
	}
	for fam, want := range map[string][]string{
		"raftlock_node_batches_total":              {"outcome=ok,", "outcome=error,"},
		"raftlock_node_forwards_total":             {"outcome=ok,", "outcome=timeout,", "outcome=closed,", "outcome=error,"},
		"raftlock_node_grant_announcements_total":  {"outcome=ok,", "outcome=error,"},
		"raftlock_node_keepalives_total":           {"result=ok,", "result=expired,", "result=no_quorum,", "result=error,"},
		"raftlock_node_releases_total":             {"reason=owner,", "reason=session-closed,", "reason=session-expired,", "reason=revoked,"},
		"raftlock_node_membership_conflicts_total": {"reason=duplicate_id,", "reason=metadata,", "reason=cluster_id,"},
		"raftlock_node_membership_changes_total":   {"action=promote,result=ok,", "action=reap,result=refused,"},
		"raftlock_node_gossip_joins_total":         {"result=ok,", "result=error,"},
	} {
		for _, w := range want {
			if !series[fam][w] {
				t.Errorf("%s{%s} absent at start (has %v)", fam, w, series[fam])
			}
		}
	}
}

// leadership_changes_total counts the leader changes a node saw, as a
// follower too (issue 16: it counted only this node's own gains and
// losses, so it stayed 0 on a follower that saw a change).
func TestLeadershipChangesCountOnAFollower(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		regs := make([]*prometheus.Registry, 3)
		c := clustertest.Start(t, clustertest.Options{Nodes: 3, Net: memnet.New(), Configure: func(i int, cfg *node.Config) {
			regs[i] = prometheus.NewRegistry()
			cfg.Registerer = regs[i]
		}})
		old := c.WaitLeader(10 * time.Second)
		c.WaitReady(10 * time.Second)
		bystander, target := (old+1)%3, (old+2)%3
		before := counter(t, regs[bystander], "raftlock_node_leadership_changes_total")
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := c.Nodes[old].Operator().TransferLeadership(ctx, c.Nodes[target].Status().ID); err != nil {
			t.Fatal(err)
		}
		for c.Nodes[bystander].Status().LeaderID != c.Nodes[target].Status().ID {
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(100 * time.Millisecond)
		if after := counter(t, regs[bystander], "raftlock_node_leadership_changes_total"); after != before+1 {
			t.Fatalf("the bystander follower's leadership_changes_total went from %v to %v over one leader change, want +1", before, after)
		}
	})
}

func counter(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() == name && len(f.GetMetric()) == 1 {
			return f.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}
