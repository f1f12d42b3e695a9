package node_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/replica"
	"github.com/raftlock/raftlock/internal/testing/clustertest"
	"github.com/raftlock/raftlock/internal/testing/memnet"
	"github.com/raftlock/raftlock/node"
)

// A follower's caller sends its own forward when none is waiting (the
// inline path); the call still returns when the caller's ctx ends, with
// an error that wraps the ctx's and does not claim ErrNotProposed: the
// leader got the command, whose reply is only late.
func TestInlineForwardEndsWithTheCallersContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := memnet.New()
		c := clustertest.Start(t, clustertest.Options{Nodes: 3, Net: net})
		l := c.WaitLeader(20 * time.Second)
		c.WaitReady(20 * time.Second)
		f := c.Follower(l)
		ctx0, cancel0 := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel0()
		s, err := replica.Of(c.Nodes[f]).Apply(ctx0, fsm.OpenSession{TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}

		net.SetByteDelay(c.RaftHost(l), c.RaftHost(f), 5*time.Second) // the leader's replies come late
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, _, err = replica.Of(c.Nodes[f]).Propose(ctx, fsm.Acquire{Session: s.Session, Lock: "x", Owner: newOwner()})
		took := time.Since(start)
		switch {
		case err == nil:
			t.Fatal("Propose succeeded though every reply was 5 s late")
		case took > 200*time.Millisecond:
			t.Fatalf("Propose returned %v after its ctx ended (took %v): %v", took-200*time.Millisecond, took, err)
		case !errors.Is(err, context.DeadlineExceeded):
			t.Fatalf("Propose: %v, want an error wrapping context.DeadlineExceeded", err)
		case errors.Is(err, node.ErrNotProposed):
			t.Fatalf("Propose: %v claims ErrNotProposed, but the leader received the command", err)
		}
		net.ClearDelays()
	})
}
