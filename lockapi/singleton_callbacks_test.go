package lockapi

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raftlock/raftlock/internal/testing/clustertest"
)

// The kubernetes/client-go#728 class: when RunSingleton's context ends,
// the job's context ends, but the lock stays held until the job has
// returned and OnStoppedLeading has run — a job still cleaning up is never
// overlapped by the next replica's. OnNewLeader sees the leaderships in
// order.
func TestSingletonReleasesOnlyAfterTheJobReturned(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := startCluster(t, clustertest.Options{})
		var mu sync.Mutex
		var log []string
		record := func(format string, args ...any) {
			mu.Lock()
			log = append(log, fmt.Sprintf(format, args...))
			mu.Unlock()
		}
		leaders := make([][]Leader, 2)
		ctxs := make([]context.Context, 2)
		cancels := make([]context.CancelFunc, 2)
		started := make(chan int, 2)
		var wg sync.WaitGroup
		run := func(i int) {
			s := newSession(t, c, i)
			ctxs[i], cancels[i] = context.WithCancel(context.Background())
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := RunSingleton(ctxs[i], s, "nightly", func(jctx context.Context, l *Lease) error {
					record("r%d job runs", i)
					started <- i
					<-jctx.Done()
					record("r%d job context ended", i)
					// Cleaning up after the context ended: the lock must still
					// be this job's.
					for range 5 {
						time.Sleep(100 * time.Millisecond)
						if h, ok := c.Nodes[i].Holder("nightly"); !ok || h.Token != l.Token() {
							t.Errorf("r%d: lock released (holder %+v) while the job still runs", i, h)
						}
					}
					record("r%d job returns", i)
					return jctx.Err()
				}, WithCallbacks(SingletonCallbacks{
					OnStartedLeading: func(l *Lease) { record("r%d started leading", i) },
					OnStoppedLeading: func(l *Lease, err error) { record("r%d stopped leading (%v)", i, errors.Is(err, context.Canceled)) },
					OnNewLeader: func(l Leader) {
						mu.Lock()
						leaders[i] = append(leaders[i], l)
						mu.Unlock()
					},
				}))
				if !errors.Is(err, context.Canceled) {
					t.Errorf("r%d: RunSingleton returned %v", i, err)
				}
			}()
		}
		run(0)
		if first := <-started; first != 0 {
			t.Fatalf("replica %d ran first", first)
		}
		run(1)
		c.Eventually(5*time.Second, func() (bool, string) {
			li, _ := c.Nodes[0].Lock("nightly")
			return len(li.Waiters) == 1, "r1 not campaigning"
		})
		cancels[0]()
		if next := <-started; next != 1 {
			t.Fatalf("replica %d ran second", next)
		}
		c.Eventually(5*time.Second, func() (bool, string) {
			mu.Lock()
			defer mu.Unlock()
			valid := 0
			for _, l := range leaders[1] {
				if l.Valid() {
					valid++
				}
			}
			return valid == 2, "r1 has not observed its own leadership"
		})
		cancels[1]()
		wg.Wait()
		want := []string{
			"r0 started leading", "r0 job runs", "r0 job context ended", "r0 job returns", "r0 stopped leading (true)",
			"r1 started leading", "r1 job runs", "r1 job context ended", "r1 job returns", "r1 stopped leading (true)",
		}
		if !slices.Equal(log, want) {
			t.Fatalf("events:\n%q\nwant\n%q", log, want)
		}
		// r0 observed until its RunSingleton returned (its own leadership),
		// r1 both leaderships, in order.
		for i, want := range []int{1, 2} {
			var tokens []uint64
			for _, l := range leaders[i] {
				if l.Valid() {
					tokens = append(tokens, uint64(l.Token))
				}
			}
			if len(tokens) != want || want == 2 && tokens[0] >= tokens[1] {
				t.Fatalf("r%d observed leaders %v", i, brief(leaders[i]))
			}
		}
	})
}
