package lockapi

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raftlock/raftlock/internal/testing/clustertest"
	"github.com/raftlock/raftlock/node"
)

type run struct {
	replica int
	lease   *Lease
}

// Exactly one runner at a time across three replicas, through a holder pause
// and a leader kill; successive runners hold strictly increasing tokens.
func TestSingletonOneRunnerThroughFaults(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := startCluster(t, clustertest.Options{})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var mu sync.Mutex
		var runs []run
		started := make(chan struct{}, 16)
		var crashed atomic.Int32
		crashed.Store(-1)
		sessions := make([]*Session, 3)
		var wg sync.WaitGroup
		for i := range 3 {
			sessions[i] = newSession(t, c, i)
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := RunSingleton(ctx, sessions[i], "tenant:7/nightly", func(jctx context.Context, l *Lease) error {
					mu.Lock()
					for _, r := range runs {
						select {
						case <-r.lease.Done():
						default:
							t.Errorf("replica %d started (token %d) while replica %d (token %d) still held the lease",
								i, l.Token(), r.replica, r.lease.Token())
						}
					}
					runs = append(runs, run{i, l})
					mu.Unlock()
					started <- struct{}{}
					<-jctx.Done()
					return jctx.Err()
				})
				switch {
				case int(crashed.Load()) == i:
					if !errors.Is(err, node.ErrClosed) {
						t.Errorf("RunSingleton on the crashed replica %d returned %v", i, err)
					}
				case !errors.Is(err, context.Canceled):
					t.Errorf("RunSingleton on replica %d returned %v", i, err)
				}
			}()
		}
		<-started
		mu.Lock()
		first := runs[0]
		mu.Unlock()

		// The holder pauses: another replica takes over.
		sessions[first.replica].pauseKeepalives(true)
		<-started
		mu.Lock()
		second := runs[1]
		mu.Unlock()
		if second.replica == first.replica {
			t.Fatalf("the paused replica %d ran again at once", first.replica)
		}

		// Kill the leader; the singleton keeps exactly one runner.
		leader := c.WaitLeader(time.Second)
		crashed.Store(int32(leader))
		c.Crash(leader)
		time.Sleep(5 * testTTL)
		mu.Lock()
		active := 0
		for _, r := range runs {
			select {
			case <-r.lease.Done():
			default:
				active++
				if r.replica == leader {
					t.Errorf("a runner on the crashed node is still active")
				}
			}
		}
		n := len(runs)
		mu.Unlock()
		if active != 1 {
			t.Fatalf("%d active runners after the leader kill, want 1 (runs %d)", active, n)
		}
		cancel()
		wg.Wait()
		for i := 1; i < len(runs); i++ {
			if runs[i].lease.Token() <= runs[i-1].lease.Token() {
				t.Fatalf("run %d token %d not above run %d token %d", i, runs[i].lease.Token(), i-1, runs[i-1].lease.Token())
			}
		}
		t.Logf("%d runs, tokens rising, first on n%d, second on n%d, leader n%d killed", len(runs), first.replica+1, second.replica+1, leader+1)
	})
}

// The election view follows the singleton from any replica.
func TestElectionObserve(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := startCluster(t, clustertest.Options{})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		e, err := NewElection(c.Nodes[2], "leader")
		if err != nil {
			t.Fatal(err)
		}
		ch, err := e.Observe(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if l := <-ch; l.Valid() {
			t.Fatalf("initial leader %+v, want none", l)
		}
		s := newSession(t, c, 0, WithOwner("reporter-a"))
		l, err := s.Lock(ctx, "leader")
		if err != nil {
			t.Fatal(err)
		}
		got := <-ch
		if got.Token != l.Token() || got.Description != "reporter-a" || got.Session != s.ID() {
			t.Fatalf("observed %+v, want token %d", got, l.Token())
		}
		if now, err := e.LeaderSync(ctx); err != nil || now.Token != l.Token() {
			t.Fatalf("LeaderSync: %+v %v", now, err)
		}
		l.Unlock(ctx)
		if got := <-ch; got.Valid() {
			t.Fatalf("after unlock observed %+v", got)
		}
		cancel()
		for range ch {
		}
	})
}
