package floorsys

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/raftlock/raftlock/bench/internal/lockservice"
)

// freeAddrs reserves n loopback ports (closed again: the replicas bind them).
func freeAddrs(t *testing.T, n int) []string {
	var out []string
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, l.Addr().String())
		l.Close()
	}
	return out
}

// startFloor starts three replicas of sys in this process and returns them
// once one is the leader, with its index.
func startFloor(t *testing.T, sys lockservice.System) ([]lockservice.Replica, int) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	free := freeAddrs(t, 6)
	addrs := [][]string{free[0:2], free[2:4], free[4:6]}
	reps := make([]lockservice.Replica, len(addrs))
	errs := make([]error, len(addrs))
	var wg sync.WaitGroup
	for i := range addrs { // each returns once a leader is known: start them together
		wg.Go(func() {
			reps[i], errs[i] = sys.StartReplica(ctx, lockservice.ReplicaConfig{Index: i, Addrs: addrs, DataDir: t.TempDir(), Log: io.Discard})
		})
	}
	wg.Wait()
	for _, r := range reps {
		if r != nil {
			t.Cleanup(func() { r.Close(context.Background()) })
		}
	}
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	for ctx.Err() == nil {
		for i, r := range reps {
			if st, _ := r.Status(ctx); st.Leader {
				return reps, i
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("no leader")
	return nil, 0
}

func TestFloorLocksOnEveryReplica(t *testing.T) {
	for _, sys := range []lockservice.System{System(), WALSystem()} {
		t.Run(sys.Name(), func(t *testing.T) {
			reps, leader := startFloor(t, sys)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			// Concurrent callers on every replica, each on its own names;
			// the followers' go through the forward.
			var wg sync.WaitGroup
			errs := make(chan error, 3*8)
			for i, r := range reps {
				for w := range 8 {
					wg.Go(func() {
						s, err := r.NewSession(ctx, time.Minute)
						if err != nil {
							errs <- err
							return
						}
						for k := range 20 {
							l, err := s.Lock(ctx, fmt.Sprintf("r%d-w%d-%d", i, w, k%3))
							if err != nil {
								errs <- fmt.Errorf("replica %d lock: %w", i, err)
								return
							}
							if err := l.Unlock(ctx); err != nil {
								errs <- fmt.Errorf("replica %d unlock: %w", i, err)
								return
							}
						}
					})
				}
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			// Unlock of a free name is refused, from the leader and through a forward.
			for _, i := range []int{leader, (leader + 1) % 3} {
				s, _ := reps[i].NewSession(ctx, time.Minute)
				l, err := s.Lock(ctx, "once")
				if err != nil {
					t.Fatal(err)
				}
				if err := l.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
				if err := l.Unlock(ctx); !errors.Is(err, ErrRefused) {
					t.Errorf("replica %d: second Unlock: %v, want ErrRefused", i, err)
				}
			}
		})
	}
}

// Waiters on a held name line up in the order their Locks committed, on
// the leader and through forwards, and each Unlock hands the name to the next.
func TestFloorHandsOffInLine(t *testing.T) {
	reps, leader := startFloor(t, WALSystem())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, _ := reps[leader].NewSession(ctx, time.Minute)
	held, err := s.Lock(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	type grant struct {
		l   lockservice.Lease
		err error
	}
	var waiters []chan grant
	for _, i := range []int{(leader + 1) % 3, leader, (leader + 2) % 3} {
		before, _ := reps[leader].Status(ctx)
		ch := make(chan grant, 1)
		ws, _ := reps[i].NewSession(ctx, time.Minute)
		go func() { l, err := ws.Lock(ctx, "x"); ch <- grant{l, err} }()
		for { // its Lock is in line once the leader committed it
			if st, _ := reps[leader].Status(ctx); st.LogIndex > before.LogIndex {
				break
			}
			if ctx.Err() != nil {
				t.Fatal("the waiter's Lock did not commit")
			}
			time.Sleep(time.Millisecond)
		}
		waiters = append(waiters, ch)
	}
	for k, ch := range waiters {
		select {
		case g := <-ch:
			t.Fatalf("waiter %d granted while the name was held: %v", k, g.err)
		case <-time.After(50 * time.Millisecond):
		}
		if err := held.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		var g grant
		select {
		case g = <-ch:
		case <-ctx.Done():
			t.Fatalf("waiter %d not granted after the Unlock before it", k)
		}
		if g.err != nil {
			t.Fatalf("waiter %d: %v", k, g.err)
		}
		held = g.l
	}
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := held.Unlock(ctx); !errors.Is(err, ErrRefused) {
		t.Errorf("Unlock after the line emptied: %v, want ErrRefused", err)
	}
}

// The contended workload's shape: workers on every replica loop on one
// name; never two hold it at once, and every Lock is granted.
func TestFloorContendedExclusion(t *testing.T) {
	for _, sys := range []lockservice.System{System(), WALSystem()} {
		t.Run(sys.Name(), func(t *testing.T) {
			reps, _ := startFloor(t, sys)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var holders, grants atomic.Int32
			var wg sync.WaitGroup
			for w := range 8 {
				wg.Go(func() {
					s, _ := reps[w%3].NewSession(ctx, time.Minute)
					for range 25 {
						l, err := s.Lock(ctx, "one")
						if err != nil {
							t.Errorf("worker %d: %v", w, err)
							return
						}
						if holders.Add(1) != 1 {
							t.Errorf("worker %d: granted while another held the name", w)
						}
						grants.Add(1)
						holders.Add(-1)
						if err := l.Unlock(ctx); err != nil {
							t.Errorf("worker %d: unlock: %v", w, err)
							return
						}
					}
				})
			}
			wg.Wait()
			if got := grants.Load(); got != 8*25 {
				t.Errorf("%d grants, want %d", got, 8*25)
			}
		})
	}
}

func TestFloorRefusesLongNames(t *testing.T) {
	var cmd [cmdSize]byte
	if err := encodeCommand(cmd[:], opLock, string(make([]byte, maxName+1))); err == nil {
		t.Fatal("a name over maxName was encoded")
	}
	if err := encodeCommand(cmd[:], opLock, string(make([]byte, maxName))); err != nil {
		t.Fatal(err)
	}
}

// A forwarded call fails with ErrNotCommitted, not a hang, when its
// replica closes.
func TestFloorCloseFailsWaiters(t *testing.T) {
	reps, leader := startFloor(t, System())
	follower := reps[(leader+1)%3]
	// Stop the leader: the follower's forwarded Lock then cannot commit.
	reps[leader].Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	s, _ := follower.NewSession(ctx, time.Minute)
	if _, err := s.Lock(ctx, "x"); !errors.Is(err, ErrNotCommitted) {
		t.Fatalf("Lock with the leader gone: %v, want ErrNotCommitted", err)
	}
}
