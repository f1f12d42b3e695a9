package raftmetricstest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/replica"
	"github.com/raftlock/raftlock/internal/testing/clustertest"
	"github.com/raftlock/raftlock/node"
)

func TestEnableRaftMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	if err := node.EnableRaftMetrics(reg); err != nil {
		t.Fatal(err)
	}
	if err := node.EnableRaftMetrics(prometheus.NewRegistry()); err != nil {
		t.Fatalf("second call: %v", err)
	}
	c := clustertest.Start(t, clustertest.Options{Nodes: 1})
	c.WaitReady(30 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := replica.Of(c.Nodes[0]).Apply(ctx, fsm.OpenSession{TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, mf := range mfs {
		if strings.HasPrefix(mf.GetName(), "raftlock_raft_") {
			found = true
		}
	}
	if !found {
		t.Fatalf("no raft metrics among %d families", len(mfs))
	}
}
