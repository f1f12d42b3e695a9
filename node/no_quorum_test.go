package node_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/nodeopts"
	"github.com/raftlock/raftlock/internal/replica"
	"github.com/raftlock/raftlock/internal/testing/clustertest"
	"github.com/raftlock/raftlock/node"
)

// Issue 14 #8 (node part): every call that cannot commit returns, within
// its deadline, an error wrapping ErrNoQuorum — also with a deadline shorter
// than an election timeout, and also for a proposal whose context ended
// before its batch left (which is moreover ErrNotProposed: it never left
// this node and can never commit).
func TestProposalsThatCannotCommitSayNoQuorum(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, li := readyCluster(t, clustertest.Options{})
		n := c.Nodes[li]
		bg := context.Background()
		s := openSession(t, bg, n, time.Minute)
		c.Isolate(li)

		// A: its batch is in raft, which cannot commit it.
		actx, cancel := context.WithTimeout(bg, 2*time.Second)
		defer cancel()
		done := make(chan error, 1)
		go func() {
			_, _, err := replica.Of(n).Propose(actx, fsm.Acquire{Session: s, Lock: "a", Owner: newOwner()})
			done <- err
		}()
		time.Sleep(time.Millisecond)

		// B: a deadline shorter than an election timeout, waiting behind A.
		const short = 20 * time.Millisecond
		bctx, cancelB := context.WithTimeout(bg, short)
		defer cancelB()
		start := time.Now()
		_, _, err := replica.Of(n).Propose(bctx, fsm.Acquire{Session: s, Lock: "b", Owner: newOwner()})
		if took := time.Since(start); took > short {
			t.Errorf("returned %v after a %v deadline", took, short)
		}
		if !errors.Is(err, node.ErrNoQuorum) || !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, node.ErrNotProposed) {
			t.Errorf("proposal behind a stuck batch: %v (want ErrNoQuorum, DeadlineExceeded, ErrNotProposed)", err)
		}

		// C: a context that had already ended: never proposed.
		cctx, cancelC := context.WithCancel(bg)
		cancelC()
		if _, _, err := replica.Of(n).Propose(cctx, fsm.Acquire{Session: s, Lock: "c", Owner: newOwner()}); !errors.Is(err, node.ErrNotProposed) || !errors.Is(err, context.Canceled) {
			t.Errorf("proposal with an ended context: %v", err)
		}
		// A, whose batch may have reached the log: no quorum, but not "not proposed".
		if err := <-done; !errors.Is(err, node.ErrNoQuorum) || errors.Is(err, node.ErrNotProposed) {
			t.Errorf("proposal in flight: %v", err)
		}
		// A short keepalive and Sync say no quorum too.
		kctx, cancelK := context.WithTimeout(bg, short)
		defer cancelK()
		if err := replica.Of(n).KeepAlive(kctx, s); !errors.Is(err, node.ErrNoQuorum) {
			t.Errorf("keepalive: %v", err)
		}
		sctx, cancelS := context.WithTimeout(bg, short)
		defer cancelS()
		if err := n.Sync(sctx); !errors.Is(err, node.ErrNoQuorum) {
			t.Errorf("sync: %v", err)
		}
		c.Heal()
	})
}

// A nil context is refused at the boundary with ErrInvalidArgument — never
// a panic in a node goroutine.
func TestNilContextIsRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, _ := readyCluster(t, clustertest.Options{Nodes: 1})
		n := c.Nodes[0]
		var nilCtx context.Context
		calls := map[string]func() error{
			"Apply": func() error {
				_, err := replica.Of(n).Apply(nilCtx, fsm.OpenSession{TTL: time.Second})
				return err
			},
			"Propose": func() error {
				_, _, err := replica.Of(n).Propose(nilCtx, fsm.OpenSession{TTL: time.Second})
				return err
			},
			"WaitApplied": func() error { return replica.Of(n).WaitApplied(nilCtx, 1) },
			"KeepAlive":   func() error { return replica.Of(n).KeepAlive(nilCtx, 1) },
			"Sync":        func() error { return n.Sync(nilCtx) },
			"WaitReady":   func() error { return n.WaitReady(nilCtx) },
			"Close":       func() error { return n.Close(nilCtx) },
			"Leave":       func() error { return n.Leave(nilCtx) },
			"Kill":        func() error { return nodeopts.Kill(nilCtx, n) },
			"Start": func() error {
				_, err := node.Start(nilCtx, c.Config(0))
				return err
			},
		}
		for name, call := range calls {
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Errorf("%s(nil ctx) panicked: %v", name, r)
					}
				}()
				if err := call(); !errors.Is(err, node.ErrInvalidArgument) {
					t.Errorf("%s(nil ctx): %v", name, err)
				}
			}()
		}
		if st := n.Status(); st.State != "leader" {
			t.Fatalf("the node did not survive: %+v", st.State)
		}
	})
}
