package node_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/nodeopts"
	"github.com/raftlock/raftlock/internal/replica"
	"github.com/raftlock/raftlock/internal/storage"
	"github.com/raftlock/raftlock/internal/testing/clustertest"
	"github.com/raftlock/raftlock/internal/testing/memnet"
	"github.com/raftlock/raftlock/node"
)

// On the leader, an Acquire that can only join a held lock's queue waits
// for company: a Release that comes a moment later (within the last
// commit's time) is committed in the same entry, so a hand-off costs one
// commit. An Acquire of a free lock leaves at once.
func TestQueueingAcquireWaitsForTheRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const write = 5 * time.Millisecond // each log append: commits take longer than the hold's cap
		c := clustertest.Start(t, clustertest.Options{Nodes: 3, Net: memnet.New(),
			Configure: func(_ int, cfg *node.Config) {
				nodeopts.Hooks(cfg).DiskFault = func(op storage.Op) error {
					if op == storage.OpAppend {
						time.Sleep(write)
					}
					return nil
				}
			}})
		l := c.Nodes[c.WaitLeader(10*time.Second)]
		c.WaitReady(10 * time.Second)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		a, b := openSession(t, ctx, l, time.Minute), openSession(t, ctx, l, time.Minute)
		oa, ob := newOwner(), newOwner()

		free := time.Now()
		r, idx, err := replica.Of(l).Propose(ctx, fsm.Acquire{Session: a, Lock: "x", Owner: oa, Wait: true})
		if err != nil || r.Status != fsmwire.StatusGranted {
			t.Fatalf("acquire x: %v %+v", err, r)
		}
		if took := time.Since(free); took > 4*write {
			t.Fatalf("an Acquire of a free lock took %v: it was held back", took)
		}

		time.Sleep(10 * write) // the proposer is idle again

		var wg sync.WaitGroup
		var qr fsm.Result
		var qidx uint64
		var qerr error
		wg.Go(func() {
			qr, qidx, qerr = replica.Of(l).Propose(ctx, fsm.Acquire{Session: b, Lock: "x", Owner: ob, Wait: true})
		})
		time.Sleep(300 * time.Microsecond) // the holder's Release, a moment later
		rr, ridx, err := replica.Of(l).Propose(ctx, fsm.Release{Session: a, Lock: "x", Owner: oa})
		wg.Wait()
		if err != nil || rr.Status != fsmwire.StatusOK || qerr != nil || qr.Status != fsmwire.StatusQueued {
			t.Fatalf("release %v %+v; queued acquire %v %+v", err, rr, qerr, qr)
		}
		if qidx != ridx || qidx <= idx {
			t.Fatalf("the queued Acquire committed at index %d and the Release at %d: want one entry", qidx, ridx)
		}
		h, ok := l.Holder("x")
		if !ok || h.Owner != ob {
			t.Fatalf("holder after the hand-off: %+v %v, want the waiter", h, ok)
		}
	})
}
