package lockapi

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raftlock/raftlock/internal/testing/clustertest"
)

// On the minority side held leases end by their local deadline, TryLock
// returns ErrNoQuorum promptly and Lock returns when its context ends with an
// error wrapping ErrNoQuorum; the majority grants the lock only after the
// minority's lease ended; after healing, locking works again.
func TestQuorumLoss(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := startCluster(t, clustertest.Options{})
		ctx := context.Background()
		leader := c.WaitLeader(time.Second)
		m := c.Follower(leader)
		var states []State
		a := newSession(t, c, m, WithStateListener(func(_, to State) { states = append(states, to) }))
		b := newSession(t, c, m, WithTTL(20*time.Second))
		held, err := a.Lock(ctx, "shard:1")
		if err != nil {
			t.Fatal(err)
		}
		major := newSession(t, c, leader)

		c.Isolate(m)
		isolated := time.Now()
		lostAt := make(chan time.Time, 1)
		go func() { <-held.Done(); lostAt <- time.Now() }()

		start := time.Now()
		_, err = b.TryLock(ctx, "shard:2")
		if !errors.Is(err, ErrNoQuorum) {
			t.Fatalf("TryLock on the minority: %v", err)
		}
		if took := time.Since(start); took > b.tryTimeout()+100*time.Millisecond {
			t.Fatalf("TryLock took %v", took)
		}
		lctx, cancel := context.WithTimeout(ctx, 700*time.Millisecond)
		_, err = b.Lock(lctx, "shard:3")
		cancel()
		if !errors.Is(err, ErrNoQuorum) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Lock on the minority: %v", err)
		}

		// The majority waits for the lock; it is granted only after the
		// minority holder's lease ended on its own clock.
		got := make(chan *Lease, 1)
		go func() {
			l, err := major.Lock(ctx, "shard:1")
			if err != nil {
				t.Errorf("majority: %v", err)
			}
			select {
			case <-held.Done():
			default:
				t.Errorf("majority granted while the minority lease was valid")
			}
			got <- l
		}()
		if lost := (<-lostAt).Sub(isolated); lost > testTTL {
			t.Fatalf("minority lease ended %v after the partition, TTL %v", lost, testTTL)
		}
		if !errors.Is(held.Err(), ErrSessionExpired) {
			t.Fatalf("minority lease: %v", held.Err())
		}
		ml := <-got
		if ml == nil || ml.Token() <= held.Token() {
			t.FailNow()
		}
		if len(states) < 2 || states[0] != StateJeopardy || states[len(states)-1] != StateLost {
			t.Fatalf("session states %v, want jeopardy … lost", states)
		}

		c.Heal()
		fresh := newSession(t, c, m)
		lctx, cancel = context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		l, err := fresh.Lock(lctx, "shard:2")
		if err != nil {
			t.Fatalf("lock after healing: %v", err)
		}
		l.Unlock(ctx)
	})
}
