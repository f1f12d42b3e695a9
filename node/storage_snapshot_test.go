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
	"github.com/raftlock/raftlock/internal/testing/memnet"
)

// Snapshot writes the state as of the applied index to the snapshot store,
// again after more entries; with an ended ctx it returns the ctx's error.
func TestSnapshotNow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := clustertest.Start(t, clustertest.Options{Nodes: 3, Net: memnet.New(), Durable: true})
		leader := c.WaitLeader(10 * time.Second)
		c.WaitReady(10 * time.Second)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		l := c.Nodes[leader]
		s := openSession(t, ctx, l, time.Minute)
		owner := newOwner()
		for _, name := range []string{"a", "b", "c"} {
			if r, err := replica.Of(l).Apply(ctx, fsm.Acquire{Session: s, Lock: name, Owner: owner}); err != nil || r.Status != fsmwire.StatusGranted {
				t.Fatalf("acquire %s: %v %+v", name, err, r)
			}
		}
		info, err := l.Operator().Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if applied := replica.Of(l).AppliedIndex(); info.Index != applied || info.Bytes <= 0 {
			t.Fatalf("snapshot %+v, applied index %d", info, applied)
		}
		if r, err := replica.Of(l).Apply(ctx, fsm.Release{Session: s, Lock: "a", Owner: owner}); err != nil || r.Status != fsmwire.StatusOK {
			t.Fatalf("release: %v %+v", err, r)
		}
		time.Sleep(time.Millisecond) // a snapshot's name has the time in ms
		again, err := l.Operator().Snapshot(ctx)
		if err != nil || again.Index <= info.Index {
			t.Fatalf("second snapshot %+v (%v) after %+v", again, err, info)
		}
		done, stop := context.WithCancel(ctx)
		stop()
		if _, err := l.Operator().Snapshot(done); !errors.Is(err, context.Canceled) {
			t.Fatalf("snapshot with an ended ctx: %v", err)
		}
	})
}
