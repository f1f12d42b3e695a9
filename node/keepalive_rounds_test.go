package node_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/node"
)

// Keepalives that arrive at the leader a few milliseconds apart share
// leadership rounds: each VerifyLeader round makes Raft heartbeat every
// follower at once, and a round per keepalive was most of an idle
// cluster's Raft traffic (the bench's keepalive window: ~30 keepalives/s,
// ~44 periodic heartbeats/s). Counted on fake time: rounds, not durations.
func TestKeepalivesShareLeadershipRounds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, leader := startMemCluster(t)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		const sessions = 24
		const ttl = 10 * time.Second
		ids := make([]fsm.SessionID, sessions)
		for i := range ids {
			ids[i] = openSession(t, ctx, c.Nodes[i%3], ttl)
		}
		time.Sleep(time.Second) // quiet
		l := c.Nodes[leader]
		before := node.LeadershipRounds(l)
		var wg sync.WaitGroup
		errs := make(chan error, sessions)
		for i, id := range ids {
			time.Sleep(2 * time.Millisecond) // spread, as sessions' timers are
			wg.Go(func() {
				if err := c.Nodes[i%3].KeepAlive(ctx, id); err != nil {
					errs <- err
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("keepalive: %v", err)
		}
		rounds := node.LeadershipRounds(l) - before
		if rounds > sessions/4 {
			t.Fatalf("%d keepalives 2 ms apart took %d leadership rounds (at most %d expected: they wait briefly to share one)", sessions, rounds, sessions/4)
		}
		t.Logf("%d keepalives, %d leadership rounds", sessions, rounds)
	})
}
