package node_test

import (
	"context"
	"testing"
	"time"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/nodeopts"
	"github.com/raftlock/raftlock/internal/replica"
	"github.com/raftlock/raftlock/node"
)

// Bootstrap without Peers is a one-node cluster at the advertised address
// (development mode, issue 16): it starts, leads and grants.
func TestBootstrapWithoutPeersIsAOneNodeCluster(t *testing.T) {
	cfg := node.DefaultConfig()
	cfg.ID, cfg.InMemory, cfg.Bootstrap = "dev", true, true
	cfg.BindAddr = "127.0.0.1:0"
	cfg.Timing = nodeopts.TestTiming()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := node.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close(context.Background())
	if err := n.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	st := n.Status()
	if len(st.Servers) != 1 || st.Servers[0].ID != "dev" || st.Servers[0].Addr != n.Addr() || st.LeaderID != "dev" {
		t.Fatalf("servers %+v leader %q, want dev alone at %s", st.Servers, st.LeaderID, n.Addr())
	}
	r, err := replica.Of(n).Apply(ctx, fsm.OpenSession{TTL: time.Second})
	if err != nil || r.Status != fsmwire.StatusOK {
		t.Fatalf("open session: %v %+v", err, r)
	}
}
