package lockapi

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/replica"
	"github.com/raftlock/raftlock/internal/testing/clustertest"
	"github.com/raftlock/raftlock/internal/testing/memnet"
)

// A grant revoked before the reply that announces it reaches the caller is
// no lease: the follower's replica applies the grant and the revocation
// while the leader's reply to the forwarded Acquire is still on its way
// (a slow connection), and Lock must then fail with ErrLeaseLost rather
// than hand out a lease that nothing will ever end.
func TestRevokedBeforeTheGrantReplyIsNoLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := memnet.New()
		c := startCluster(t, clustertest.Options{Net: net})
		leader := c.WaitLeader(10 * time.Second)
		f := c.Follower(leader)
		s := newSession(t, c, f)
		flows := net.Flows(memnet.FlowFilter{From: c.RaftHost(f), To: c.RaftHost(leader), Preface: clustertest.PrefaceRPC})
		if len(flows) == 0 {
			t.Fatal("no RPC connection from the follower to the leader")
		}
		for _, fl := range flows {
			net.DelayFlow(fl.ID, memnet.Backward, 500*time.Millisecond)
		}
		const name = "revoked-in-flight"
		type result struct {
			l   *Lease
			err error
		}
		done := make(chan result, 1)
		go func() {
			l, err := s.Lock(context.Background(), name)
			done <- result{l, err}
		}()
		var tok Token
		for deadline := time.Now().Add(400 * time.Millisecond); ; {
			if h, ok := c.Nodes[f].Holder(name); ok {
				tok = h.Token
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the follower never applied the grant before the reply")
			}
			time.Sleep(5 * time.Millisecond)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if _, err := replica.Of(c.Nodes[leader]).Apply(ctx, fsm.Revoke{Lock: name, Token: tok, By: "test", Why: "revoked while the reply is delayed"}); err != nil {
			t.Fatalf("revoke: %v", err)
		}
		for {
			if _, ok := c.Nodes[f].Holder(name); !ok {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		select {
		case <-done:
			t.Fatal("Lock returned before the delayed reply: the test did not test the race")
		default:
		}
		net.ClearFlows()
		r := <-done
		if r.err == nil {
			select {
			case <-r.l.Done():
				t.Fatalf("Lock returned a lease already lost (%v); want an error", r.l.Err())
			default:
				t.Fatalf("Lock returned a live lease (token %d) for a grant revoked before the reply arrived", r.l.Token())
			}
		}
		if !errors.Is(r.err, ErrLeaseLost) {
			t.Fatalf("Lock: %v, want ErrLeaseLost", r.err)
		}
	})
}

// After a snapshot restore the Resync can arrive while events applied
// before the restore are still queued; resync judges every wait and lease
// from the state at its applied index, and a queued event at or below that
// index must not undo its verdict (a stale grant would otherwise race the
// failure resync gave the wait, and Lock would pick one at random).
func TestEventsBelowTheResyncAreSkipped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := startCluster(t, clustertest.Options{})
		s := newSession(t, c, 0)
		applied := replica.Of(c.Nodes[0]).AppliedIndex()
		p := &pending{name: "stale", owner: newOwnerID(), granted: make(chan grant, 1), failed: make(chan error, 1), s: s}
		s.mu.Lock()
		s.pending[p.owner] = p
		p.queued, p.index = true, applied // queued, and in the state resync reads: neither held nor waiting
		s.mu.Unlock()
		s.resync()
		select {
		case err := <-p.failed:
			t.Logf("resync's verdict: %v", err)
		default:
			t.Fatal("resync left a wait the state does not have")
		}
		s.handle(fsm.Event{Kind: fsmwire.EventGranted, Index: applied, Lock: p.name, Owner: p.owner, Token: 7})
		select {
		case g := <-p.granted:
			t.Fatalf("a grant at index %d, in the state resync read, reached the wait after resync failed it: %+v", applied, g)
		default:
		}
		s.handle(fsm.Event{Kind: fsmwire.EventGranted, Index: applied + 1000, Lock: p.name, Owner: p.owner, Token: 8})
		select {
		case g := <-p.granted:
			if g.token != 8 {
				t.Fatalf("grant %+v, want token 8", g)
			}
		default:
			t.Fatal("a grant above the resync's index did not reach the wait")
		}
		s.mu.Lock()
		delete(s.pending, p.owner)
		s.mu.Unlock()
	})
}

// An operator revokes a reader's grant and a semaphore holder's permits by
// token (node.Operator.Revoke): each lease ends (ErrLeaseLost, "revoked"), as a
// revoked lock's does, the holder's session lives on, and the writer and
// the request queued behind them are granted. Before, Revoke matched the
// exclusive holder only: "not held", and the writer kept waiting.
func TestRevokeTakesSharedGrants(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := startCluster(t, clustertest.Options{})
		ctx := context.Background()
		leader := c.WaitLeader(10 * time.Second)
		holder := newSession(t, c, c.Follower(leader))
		other := newSession(t, c, leader)
		pool := Semaphore{Name: "pool", Limit: 3}
		reader, err := holder.RLock(ctx, "rw")
		if err != nil {
			t.Fatal(err)
		}
		permits, err := holder.Acquire(ctx, pool, 2)
		if err != nil {
			t.Fatal(err)
		}
		type result struct {
			l   *Lease
			err error
		}
		writer, more := make(chan result, 1), make(chan result, 1)
		go func() { l, err := other.Lock(ctx, "rw"); writer <- result{l, err} }()
		go func() { l, err := other.Acquire(ctx, pool, 2); more <- result{l, err} }()
		synctest.Wait() // both queued

		for _, l := range []*Lease{reader, permits} {
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			rv, err := c.Nodes[c.Follower(leader)].Operator().Revoke(rctx, l.Name(), l.Token(), "test", "shared grant stuck")
			cancel()
			if err != nil {
				t.Fatalf("revoke %s token %d: %v", l.Name(), l.Token(), err)
			}
			if rv.Holder.Token != l.Token() || SessionID(rv.Holder.Session) != holder.ID() {
				t.Fatalf("revoked %+v, want token %d of session %d", rv.Holder, l.Token(), holder.ID())
			}
			select {
			case <-l.Done():
			case <-time.After(5 * time.Second):
				t.Fatalf("the revoked lease of %s did not end", l.Name())
			}
			if err := l.Err(); !errors.Is(err, ErrLeaseLost) || !strings.Contains(err.Error(), "revoked") {
				t.Fatalf("revoked lease of %s: %v", l.Name(), err)
			}
		}
		for name, ch := range map[string]chan result{"writer": writer, "permits": more} {
			select {
			case r := <-ch:
				if r.err != nil {
					t.Fatalf("%s: %v", name, r.err)
				}
				if r.l.Token() <= reader.Token() {
					t.Fatalf("%s: token %d not above the revoked ones", name, r.l.Token())
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("%s still waits after the revocations", name)
			}
		}
		if holder.Err() != nil {
			t.Fatalf("the holder's session ended: %v", holder.Err())
		}
	})
}
