package node_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/replica"
	"github.com/raftlock/raftlock/internal/testing/clustertest"
	"github.com/raftlock/raftlock/node"
)

// Issue 14 #4: the configured quotas become the cluster's (the leader
// proposes them); a command beyond one is refused with a clear result,
// changes nothing, and is counted by quota.
func TestConfiguredQuotasAreEnforced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim := fsm.Limits{MaxLockNameLen: 16, MaxWaitersPerLock: 1, MaxLocksPerSession: 2, MaxSessions: 3, RequestWindow: 8}
		c, li := readyCluster(t, clustertest.Options{Configure: func(i int, cfg *node.Config) { cfg.Limits = lim }})
		c.WaitLimits(lim, 10*time.Second)
		ctx := context.Background()
		f := c.Nodes[c.Follower(li)]
		a := openSession(t, ctx, f, time.Minute)
		b := openSession(t, ctx, f, time.Minute)
		replica.Of(f).Apply(ctx, fsm.Acquire{Session: a, Lock: "l", Owner: newOwner()})
		replica.Of(f).Apply(ctx, fsm.Acquire{Session: b, Lock: "l", Owner: newOwner(), Wait: true})
		replica.Of(f).Apply(ctx, fsm.Acquire{Session: a, Lock: "m", Owner: newOwner()})
		before := f.Stats()
		for _, tc := range []struct {
			c fsm.Command
			q fsmwire.Quota
		}{
			{fsm.Acquire{Session: b, Lock: "a-name-too-long-17", Owner: newOwner()}, fsmwire.QuotaLockName},
			{fsm.Acquire{Session: b, Lock: "l", Owner: newOwner(), Wait: true}, fsmwire.QuotaWaiters},
			{fsm.Acquire{Session: a, Lock: "n", Owner: newOwner()}, fsmwire.QuotaSessionLocks},
			{fsm.Acquire{Session: b, Lock: "n", Owner: newOwner(), Seq: 9, AckBelow: 1}, fsmwire.QuotaRequests},
		} {
			r, err := replica.Of(f).Apply(ctx, tc.c)
			if err != nil || r.Status != fsmwire.StatusQuota || r.Quota != tc.q || !errors.Is(r.Err(), fsmwire.ErrQuota) {
				t.Fatalf("%+v: %v %+v", tc.c, err, r)
			}
		}
		openSession(t, ctx, f, time.Minute) // the third
		if r, err := replica.Of(f).Apply(ctx, fsm.OpenSession{TTL: time.Minute}); err != nil || r.Status != fsmwire.StatusQuota || r.Quota != fsmwire.QuotaSessions {
			t.Fatalf("fourth session: %v %+v", err, r)
		}
		after := f.Stats()
		if after.Held != before.Held || after.Waiters != before.Waiters || after.Sessions != before.Sessions+1 {
			t.Fatalf("refused commands changed the state: %+v → %+v", before, after)
		}
		leader := c.Nodes[c.WaitLeader(time.Second)]
		for _, q := range []fsmwire.Quota{fsmwire.QuotaLockName, fsmwire.QuotaWaiters, fsmwire.QuotaSessionLocks, fsmwire.QuotaSessions, fsmwire.QuotaRequests} {
			if got := node.QuotaRefusals(leader, q); got != 1 {
				t.Errorf("refusals by %s: %v, want 1", q, got)
			}
		}
	})
}

// Config.Validate refuses quotas beyond the hard limits.
func TestConfigValidatesLimits(t *testing.T) {
	cfg := node.DefaultConfig()
	cfg.ID, cfg.InMemory, cfg.Bootstrap = "n1", true, true
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if cfg.Limits != fsm.DefaultLimits() {
		t.Fatalf("default limits %+v", cfg.Limits)
	}
	for _, l := range []fsm.Limits{{MaxLockNameLen: fsmwire.MaxLockNameLen + 1}, {MaxWaitersPerLock: -1}, {RequestWindow: fsmwire.MaxRequestWindow + 1},
		{MaxLocks: -1}, {MaxStateBytes: 1 << 41}, {NodeShares: 1025}, {MaxSessionWaitersPerLock: -1}} {
		cfg.Limits = l
		if err := cfg.Validate(); !errors.Is(err, node.ErrInvalidConfig) {
			t.Fatalf("limits %+v: %v", l, err)
		}
	}
}
