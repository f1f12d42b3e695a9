package node_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/lockinfo"
	"github.com/raftlock/raftlock/internal/replica"
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
		ids := make([]lockinfo.SessionID, sessions)
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
				if err := replica.Of(c.Nodes[i%3]).KeepAlive(ctx, id); err != nil {
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

// A follower's keepalives that come together (sessions renew on a shared
// grid) reach the leader in one request, and each gets its own verdict: a
// closed session's keepalive is refused, the others are renewed.
func TestFollowerKeepalivesShareOneRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, leader := startMemCluster(t)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		f := c.Nodes[(leader+1)%3]
		const sessions = 20
		ids := make([]lockinfo.SessionID, sessions)
		for i := range ids {
			ids[i] = openSession(t, ctx, f, 10*time.Second)
		}
		closed := ids[7]
		if r, err := replica.Of(f).Apply(ctx, fsm.CloseSession{Session: closed}); err != nil || r.Status != fsmwire.StatusOK {
			t.Fatalf("close session: %v %+v", err, r)
		}
		time.Sleep(time.Second) // quiet
		before := node.Forwards(f)
		errs := make([]error, sessions)
		var wg sync.WaitGroup
		for i, id := range ids {
			wg.Go(func() { errs[i] = replica.Of(f).KeepAlive(ctx, id) })
		}
		wg.Wait()
		for i, err := range errs {
			switch {
			case ids[i] == closed && !errors.Is(err, replica.ErrSessionExpired):
				t.Errorf("keepalive of the closed session: %v, want ErrSessionExpired", err)
			case ids[i] != closed && err != nil:
				t.Errorf("keepalive of session %d: %v", ids[i], err)
			}
		}
		if n := node.Forwards(f) - before; n > 2 {
			t.Fatalf("%d keepalives at once sent %v requests to the leader, want them in one", sessions, n)
		}
	})
}
