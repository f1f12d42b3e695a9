package floorsys

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
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
			// A held name is refused, from the leader and through a forward;
			// Unlock of a free name too.
			follower := (leader + 1) % 3
			s, _ := reps[leader].NewSession(ctx, time.Minute)
			held, err := s.Lock(ctx, "held")
			if err != nil {
				t.Fatal(err)
			}
			for _, i := range []int{leader, follower} {
				s, _ := reps[i].NewSession(ctx, time.Minute)
				if _, err := s.Lock(ctx, "held"); !errors.Is(err, ErrRefused) {
					t.Errorf("replica %d: Lock of a held name: %v, want ErrRefused", i, err)
				}
			}
			if err := held.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			if err := held.Unlock(ctx); !errors.Is(err, ErrRefused) {
				t.Errorf("second Unlock: %v, want ErrRefused", err)
			}
			fs, _ := reps[follower].NewSession(ctx, time.Minute)
			if _, err := fs.Lock(ctx, "held"); err != nil {
				t.Errorf("Lock after Unlock, forwarded: %v", err)
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
