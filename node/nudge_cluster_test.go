package node_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/replica"
	"github.com/raftlock/raftlock/internal/testing/clustertest"
	"github.com/raftlock/raftlock/internal/testing/memnet"
)

// With a long CommitTimeout (the leader's empty AppendEntries tick), a
// follower still applies its own writes promptly: Apply (read-your-writes)
// and Sync on a quiet cluster return well before the tick, because the
// follower nudges the leader for its commit index. (On fake time: the
// figures are the protocol's, not the machine's.)
func TestFollowerLearnsCommitBeforeTick(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, leader := startMemCluster(t)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		f := c.Nodes[c.Follower(leader)]
		tick := f.Timing().CommitTimeout
		time.Sleep(3 * tick) // quiet: nothing in flight

		for round := range 3 {
			start := time.Now()
			r, err := replica.Of(f).Apply(ctx, fsm.OpenSession{TTL: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			if took := time.Since(start); took >= tick {
				t.Fatalf("round %d: Apply on a follower took %v, the commit tick is %v: the follower waited for the tick", round, took, tick)
			}
			if _, ok := f.Session(r.Session); !ok {
				t.Fatalf("round %d: Apply returned before the follower applied the session", round)
			}
			// A write through the leader, then a linearizable read on the follower.
			l := c.Nodes[leader]
			w, err := replica.Of(l).Apply(ctx, fsm.OpenSession{TTL: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			start = time.Now()
			if err := f.Sync(ctx); err != nil {
				t.Fatal(err)
			}
			if took := time.Since(start); took >= tick {
				t.Fatalf("round %d: Sync on a follower took %v, the commit tick is %v", round, took, tick)
			}
			if _, ok := f.Session(w.Session); !ok {
				t.Fatalf("round %d: Sync returned before the follower applied the leader's write", round)
			}
			time.Sleep(3 * tick)
		}
	})
}

// Syncs on the followers of an idle cluster, one after the other, write a
// few Noops in all, not one per Sync: a Sync does not wait for the Noop an earlier
// Sync's nudge wrote (which changes nothing a read sees), so it does not
// nudge again — the chase that made every Sync one more Raft entry, each
// follower for ever one entry behind the leader.
func TestSyncsDoNotChaseTheirNudges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := clustertest.Start(t, clustertest.Options{Nodes: 5, Net: memnet.New()})
		leader := c.WaitLeader(10 * time.Second)
		c.WaitReady(10 * time.Second)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		l := c.Nodes[leader]
		w, err := replica.Of(l).Apply(ctx, fsm.OpenSession{TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		before := replica.Of(l).AppliedIndex()
		for round := range 10 {
			for i, n := range c.Nodes {
				if err := n.Sync(ctx); err != nil {
					t.Fatal(err)
				}
				if _, ok := n.Session(w.Session); !ok {
					t.Fatalf("round %d: Sync on %s returned before it applied the leader's write", round, clustertest.ID(i))
				}
			}
		}
		// The first round's nudges (and the quiet-log flush) may write a few
		// Noops while they race; later rounds none.
		if grew := replica.Of(l).AppliedIndex() - before; grew > 4 {
			t.Fatalf("40 Syncs on followers of an idle cluster wrote %d entries (at most 4 expected: the nudges chase each other)", grew)
		}
	})
}

// A follower applies the leader's writes promptly without asking — what a
// Subscription there (an Election observer, a watch) sees — though the
// commit tick is long: once the leader's log goes quiet after an entry, it
// writes one Noop that carries the commit index (and none after a Noop).
func TestFollowerAppliesPromptlyWhenQuiet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, leader := startMemCluster(t)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		l, f := c.Nodes[leader], c.Nodes[c.Follower(leader)]
		tick := f.Timing().CommitTimeout
		time.Sleep(3 * tick)
		for round := range 3 {
			r, err := replica.Of(l).Apply(ctx, fsm.OpenSession{TTL: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			for {
				if _, ok := f.Session(r.Session); ok {
					break
				}
				if took := time.Since(start); took >= tick/5 {
					t.Fatalf("round %d: the follower had not applied the leader's write %v after it committed (commit tick %v)", round, took, tick)
				}
				time.Sleep(time.Millisecond)
			}
			before := replica.Of(l).AppliedIndex()
			time.Sleep(3 * tick) // quiet: at most the one Noop, no chain of them
			if grew := replica.Of(l).AppliedIndex() - before; grew > 1 {
				t.Fatalf("round %d: %d entries written while the cluster was quiet", round, grew)
			}
		}
	})
}
