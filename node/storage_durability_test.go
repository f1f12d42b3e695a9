package node_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/lockinfo"
	"github.com/raftlock/raftlock/internal/replica"
	"github.com/raftlock/raftlock/internal/testing/clustertest"
	"github.com/raftlock/raftlock/internal/testing/memnet"
	"github.com/raftlock/raftlock/node"
)

// Durability of both log stores: writers on every replica acquire fresh
// locks; at a random moment one replica, or every replica at once, crashes
// (nodeopts.Kill: nothing is flushed or handed over); all restart from their
// data dirs. Every acquisition that was acknowledged before the crash must
// be held, with its token, on every replica afterwards. (An in-process
// crash loses what a process crash loses; what the disk cache holds
// survives it, as it survives a kill -9.)
func TestCrashRestartLosesNothingAcknowledged(t *testing.T) {
	for _, store := range logStores {
		for round := range 3 {
			t.Run(fmt.Sprintf("%s/round=%d", store, round), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					crashRestartRound(t, store, rand.New(rand.NewPCG(uint64(round), 21)))
				})
			})
		}
	}
}

type acked struct {
	name  string
	owner lockinfo.OwnerID
	token lockinfo.Token
}

func crashRestartRound(t *testing.T, store node.LogStore, rng *rand.Rand) {
	c := clustertest.Start(t, clustertest.Options{Nodes: 3, Net: memnet.New(), Durable: true, LogStore: store})
	c.WaitLeader(10 * time.Second)
	c.WaitReady(10 * time.Second)
	ctx := context.Background()
	sessions := make([]lockinfo.SessionID, 3)
	for i, n := range c.Nodes {
		sessions[i] = openSession(t, ctx, n, 24*time.Hour)
	}

	var (
		mu     sync.Mutex
		done   []acked
		stop   = make(chan struct{})
		wg     sync.WaitGroup
		target = 20 + rng.IntN(500) // a random point of the writes: after this many acks
		reach  = make(chan struct{})
	)
	for w := range 6 {
		n, s := c.Nodes[w%3], sessions[w%3]
		wg.Go(func() {
			for k := 0; k < 2000; k++ { // within the locks-per-session quota
				select {
				case <-stop:
					return
				default:
				}
				a := acked{name: fmt.Sprintf("w%d/%d", w, k), owner: newOwner()}
				actx, cancel := context.WithTimeout(ctx, 2*time.Second)
				r, err := replica.Of(n).Apply(actx, fsm.Acquire{Session: s, Lock: a.name, Owner: a.owner})
				cancel()
				if err != nil {
					return // the crash (or its aftermath): not acknowledged
				}
				if r.Status != fsmwire.StatusGranted {
					t.Errorf("%s: %+v", a.name, r)
					return
				}
				a.token = r.Token
				mu.Lock()
				done = append(done, a)
				if len(done) == target {
					close(reach)
				}
				mu.Unlock()
			}
		})
	}
	select {
	case <-reach:
	case <-time.After(time.Minute):
		t.Fatalf("%d acknowledgements were not reached", target)
	}
	all := rng.IntN(2) == 0
	victims := []int{rng.IntN(3)}
	if all {
		victims = []int{0, 1, 2}
	}
	mu.Lock()
	before := len(done) // acknowledged before the first crash
	mu.Unlock()
	for _, i := range victims {
		c.Crash(i)
	}
	close(stop)
	if !all {
		time.Sleep(time.Second) // the others go on without it
	}
	for _, i := range victims {
		c.Restart(i)
	}
	wg.Wait()
	c.WaitLeader(20 * time.Second)
	c.WaitReady(20 * time.Second)
	for i, n := range c.Nodes {
		if err := n.Sync(ctx); err != nil {
			t.Fatalf("%s: sync: %v", c.ID(i), err)
		}
		for _, a := range done {
			h, ok := n.Holder(a.name)
			if !ok || h.Owner != a.owner || h.Token != a.token {
				t.Fatalf("%s (crashed %v): acknowledged %s (token %d) lost after the restart: holder %+v, %v",
					c.ID(i), victims, a.name, a.token, h, ok)
			}
		}
	}
	t.Logf("%d acknowledged (%d before the crash of %v), all present on every replica", len(done), before, victims)
}
