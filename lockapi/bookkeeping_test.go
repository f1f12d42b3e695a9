package lockapi

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raftlock/raftlock/internal/testing/clustertest"
)

// bookkeeping counts what the session remembers about acquisitions that are
// not (or no longer) leases.
func (s *Session) bookkeeping() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.pending) + len(s.releases)
}

// 5,000 TryLock calls with a context that had already ended leave nothing
// behind, in the session or in the cluster.
func TestCancelledTryLocksLeaveNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := startCluster(t, clustertest.Options{})
		for _, i := range []int{c.WaitLeader(time.Second), c.Follower(c.WaitLeader(time.Second))} {
			s := newSession(t, c, i)
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			for k := range 5000 {
				if _, err := s.TryLock(ctx, fmt.Sprintf("c%d", k)); !errors.Is(err, context.Canceled) {
					t.Fatalf("TryLock with a cancelled context: %v", err)
				}
			}
			synctest.Wait()
			if n := s.bookkeeping(); n != 0 {
				t.Errorf("session on %s remembers %d acquisitions after 5,000 cancelled TryLocks", clustertest.ID(i), n)
			}
			if err := c.Nodes[i].Sync(context.Background()); err != nil {
				t.Fatal(err)
			}
			if st := c.Nodes[i].Stats(); st.Locks != 0 {
				t.Errorf("the cluster holds %d locks", st.Locks)
			}
		}
	})
}

// BenchmarkCancelledTryLock: TryLock calls whose context had already ended,
// on a follower. Reports what the session still remembers afterwards
// (entries per call) and the heap that stays in use per call.
func BenchmarkCancelledTryLock(b *testing.B) {
	c, leader := benchCluster(b)
	s := benchSession(b, c.Nodes[c.Follower(leader)])
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	b.ResetTimer()
	for k := range b.N {
		s.TryLock(ctx, fmt.Sprintf("c%d", k))
	}
	b.StopTimer()
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(s.bookkeeping())/float64(b.N), "entries/op")
	b.ReportMetric(float64(int64(after.HeapInuse)-int64(before.HeapInuse))/float64(b.N), "retained-B/op")
}
