// Package nodeopts is node's test-options path: the typed front of
// internal/nodehooks (test hooks in a node.Config, a crash of a node) and
// the timings in-process tests and test clusters run with. Tests, the test
// machinery under internal/testing and the example replica's "test" timing
// use it; an application has no use for it.
package nodeopts

import (
	"context"
	"time"

	"github.com/raftlock/raftlock/internal/nodehooks"
	"github.com/raftlock/raftlock/node"
)

// Hooks returns cfg's test hooks, to be set in place (each nil field means
// the production behaviour): nodeopts.Hooks(&cfg).WallClock = clock.
func Hooks(cfg *node.Config) *nodehooks.Hooks { return nodehooks.Of(cfg) }

// Kill stops n abruptly, as a crash would look to the rest of the cluster:
// no leadership hand-off, no gossip leave (members see it fail). Storage is
// closed cleanly, so the node can be restarted from its data dir. Like
// Node.Close, it returns when everything has stopped or ctx ends.
func Kill(ctx context.Context, n *node.Node) error { return nodehooks.Kill(ctx, n) }

// TestTiming suits in-process tests: 50 ms Raft timeouts.
func TestTiming() node.Timing {
	return node.Timing{
		HeartbeatTimeout:   50 * time.Millisecond,
		ElectionTimeout:    50 * time.Millisecond,
		LeaderLeaseTimeout: 50 * time.Millisecond,
		CommitTimeout:      50 * time.Millisecond,
	}
}

// TestGossipTiming suits in-process tests on an in-memory network (or on
// fake time): failures are detected within about half a second.
func TestGossipTiming() node.GossipTiming {
	return node.GossipTiming{
		ProbeInterval:     100 * time.Millisecond,
		ProbeTimeout:      50 * time.Millisecond,
		GossipInterval:    20 * time.Millisecond,
		PushPullInterval:  2 * time.Second,
		SuspicionMult:     3,
		TCPTimeout:        time.Second,
		RetryJoinInterval: 200 * time.Millisecond,
	}
}
