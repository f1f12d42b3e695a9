package lockapi

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/raftlock/raftlock/internal/testing/clustertest"
)

// An Unlock that cannot commit in time (its replica is cut off) is retried
// in the background: once the partition heals — the session survived it —
// the lock is released without anyone calling Unlock again.
func TestFailedUnlockIsRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := startCluster(t, clustertest.Options{})
		ctx := context.Background()
		m := c.Follower(c.WaitLeader(time.Second))
		metrics, err := NewMetrics(nil)
		if err != nil {
			t.Fatal(err)
		}
		a := newSession(t, c, m, WithTTL(3*time.Second), WithMetrics(metrics))
		other := newSession(t, c, c.Follower(m))
		l, err := a.Lock(ctx, "x")
		if err != nil {
			t.Fatal(err)
		}
		c.Isolate(m)
		uctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		err = l.Unlock(uctx)
		cancel()
		if !errors.Is(err, ErrNoQuorum) {
			t.Fatalf("Unlock on the cut-off replica: %v", err)
		}
		if !errors.Is(l.Err(), ErrUnlocked) {
			t.Fatalf("lease after the failed Unlock: %v", l.Err())
		}
		time.Sleep(200 * time.Millisecond)
		if p := metricValue(metrics.releasesPending); p != 1 {
			t.Errorf("releases pending during the partition: %v, want 1", p)
		}
		c.Heal()
		time.Sleep(3 * time.Second) // longer than the TTL: the session must have survived on its keepalives
		if err := a.Err(); err != nil {
			t.Fatalf("session lost: %v", err)
		}
		if _, err := other.TryLock(ctx, "x"); err != nil {
			t.Fatalf("lock still held after the partition healed: %v", err)
		}
		if p, r := metricValue(metrics.releasesPending), metricValue(metrics.releaseRetries); p != 0 || r < 1 {
			t.Errorf("after the release committed: %v pending, %v retries", p, r)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Errorf("Unlock again after the release committed: %v", err)
		}
	})
}

// metricValue reads a gauge or a counter.
func metricValue(c prometheus.Metric) float64 {
	var m dto.Metric
	c.Write(&m)
	if g := m.GetGauge(); g != nil {
		return g.GetValue()
	}
	return m.GetCounter().GetValue()
}

// A singleton job that fails while its replica is cut off cannot release its
// lock; the singleton must not campaign again behind its own grant (it would
// never run again on any replica).
func TestSingletonDoesNotQueueBehindItsOwnGrant(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := startCluster(t, clustertest.Options{})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		m := c.Follower(c.WaitLeader(time.Second))
		s := newSession(t, c, m, WithTTL(3*time.Second))
		runs := make(chan *Lease, 4)
		done := make(chan error, 1)
		n := 0
		go func() {
			done <- RunSingleton(ctx, s, "job", func(jctx context.Context, l *Lease) error {
				runs <- l
				if n++; n == 1 {
					c.Isolate(m)
					return errors.New("first run fails while cut off")
				}
				<-jctx.Done()
				return nil
			})
		}()
		first := <-runs
		time.Sleep(700 * time.Millisecond) // the Unlock (try timeout 400 ms) has failed
		c.Heal()
		select {
		case second := <-runs:
			if second.Token() <= first.Token() {
				t.Fatalf("second run token %d not above %d", second.Token(), first.Token())
			}
		case <-time.After(20 * time.Second):
			li, _ := c.Nodes[m].Lock("job")
			t.Fatalf("the singleton never ran again; lock %+v", li)
		}
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("RunSingleton: %v", err)
		}
	})
}

// RunSingleton returns nil only once the finished job's lock is released.
func TestSingletonReturnsOnlyOnceReleased(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := startCluster(t, clustertest.Options{})
		ctx := context.Background()
		m := c.Follower(c.WaitLeader(time.Second))
		s := newSession(t, c, m, WithTTL(3*time.Second))
		healed := make(chan struct{})
		go func() {
			time.Sleep(1500 * time.Millisecond)
			c.Heal()
			close(healed)
		}()
		err := RunSingleton(ctx, s, "once", func(context.Context, *Lease) error {
			c.Isolate(m)
			return nil
		})
		if err != nil {
			t.Fatalf("RunSingleton: %v", err)
		}
		<-healed
		if err := c.Nodes[m].Sync(ctx); err != nil {
			t.Fatal(err)
		}
		if h, ok := c.Nodes[m].Holder("once"); ok {
			t.Fatalf("RunSingleton returned nil while its session still held the lock: %+v", h)
		}
		if err := s.Err(); err != nil {
			t.Fatalf("session: %v", err)
		}
	})
}
