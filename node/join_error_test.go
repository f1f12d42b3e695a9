package node_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/raftlock/raftlock/internal/nodeopts"
	"github.com/raftlock/raftlock/node"
)

// A node that joins a static cluster through Peers none of which answers
// used to say nothing but "in no cluster yet": the join loop dropped the
// errors. Status.JoinErr and WaitReady's reason now name each peer and
// why its call failed.
func TestJoinErrorNamesThePeers(t *testing.T) {
	cfg := node.DefaultConfig()
	cfg.ID, cfg.InMemory, cfg.BindAddr = "c", true, "127.0.0.1:0"
	cfg.Timing = nodeopts.TestTiming()
	cfg.AttemptTimeout = 200 * time.Millisecond
	// Nobody listens on port 1 of loopback: every join call is refused.
	cfg.Peers = []node.Peer{{ID: "a", Addr: "127.0.0.1:1"}, {ID: "c", Addr: "127.0.0.1:2"}}
	n, err := node.Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close(context.Background())
	deadline := time.Now().Add(10 * time.Second)
	for n.Status().JoinErr == "" && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	st := n.Status()
	if !strings.HasPrefix(st.JoinErr, "no peer answered the join: tried a at 127.0.0.1:1: ") {
		t.Fatalf("Status.JoinErr = %q, want the peer a and why", st.JoinErr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := n.WaitReady(ctx); err == nil || !strings.Contains(err.Error(), "join: no peer answered the join: tried a at 127.0.0.1:1") {
		t.Fatalf("WaitReady: %v, want the join error in its reason", err)
	}
}
