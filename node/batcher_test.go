package node

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raftlock/raftlock/fsm"
)

// The batcher runs at most inflight batches at once, gathers what arrives
// meanwhile into the next batch, and does not propose abandoned proposals.
func TestBatcherInflightAndGathering(t *testing.T) {
	for _, inflight := range []int{1, 3} {
		synctest.Test(t, func(t *testing.T) {
			var wg sync.WaitGroup
			var mu sync.Mutex
			running, maxRunning := 0, 0
			var sizes []int
			b := &batcher{max: 100, inflight: inflight, wg: &wg, run: func(batch []*proposal) {
				mu.Lock()
				running++
				maxRunning = max(maxRunning, running)
				sizes = append(sizes, len(batch))
				mu.Unlock()
				time.Sleep(10 * time.Millisecond) // a commit
				mu.Lock()
				running--
				mu.Unlock()
				for _, p := range batch {
					p.finish(outcome{index: 1})
				}
			}}
			ctx := context.Background()
			gone, cancel := context.WithCancel(ctx)
			cancel()
			var ps []*proposal
			for i := range 20 {
				c := ctx
				if i == 19 {
					c = gone // abandoned before its batch left
				}
				p := newProposal(c, fsm.Tick{})
				ps = append(ps, p)
				b.submit(p)
			}
			wg.Wait()
			if maxRunning != inflight {
				t.Fatalf("inflight %d: %d batches ran at once", inflight, maxRunning)
			}
			total := 0
			for _, n := range sizes {
				total += n
			}
			if total != 19 || len(sizes) != inflight+1 {
				t.Fatalf("inflight %d: batches %v, want %d batches of 19 proposals", inflight, sizes, inflight+1)
			}
			if out := ps[19].wait(); out.err == nil {
				t.Fatal("abandoned proposal was run")
			}
			b.close()
			late := newProposal(ctx, fsm.Tick{})
			b.submit(late)
			if out := late.wait(); out.err != ErrClosed {
				t.Fatalf("after close: %v", out.err)
			}
		})
	}
}

// Linger: closed-loop callers that come back a moment after their batch
// finishes join the next batch together instead of splitting into cohorts;
// a lone caller never waits; and the wait is bounded when callers do not
// come back.
func TestBatcherLinger(t *testing.T) {
	const commit = 8 * time.Millisecond
	newBatcher := func(wg *sync.WaitGroup, sizes *[]int, mu *sync.Mutex) *batcher {
		return &batcher{max: 100, inflight: 1, wg: wg, lingerFrac: 0.25, run: func(batch []*proposal) {
			mu.Lock()
			*sizes = append(*sizes, len(batch))
			mu.Unlock()
			time.Sleep(commit)
			for _, p := range batch {
				p.finish(outcome{index: 1})
			}
		}}
	}
	t.Run("closed loop", func(t *testing.T) {
		for _, linger := range []float64{0, 0.25} {
			synctest.Test(t, func(t *testing.T) {
				var wg, callers sync.WaitGroup
				var mu sync.Mutex
				var sizes []int
				b := newBatcher(&wg, &sizes, &mu)
				b.lingerFrac = linger
				for i := range 8 {
					callers.Go(func() {
						time.Sleep(time.Duration(i) * time.Millisecond) // staggered start
						for range 20 {
							p := newProposal(context.Background(), fsm.Tick{})
							b.submit(p)
							p.wait()
							time.Sleep(100 * time.Microsecond) // the caller's own work
						}
					})
				}
				callers.Wait()
				wg.Wait()
				b.close()
				// Once the callers are in step, every batch carries all of them
				// with linger; without it they stay split.
				full := 0
				for _, n := range sizes[len(sizes)/2:] {
					if n == 8 {
						full++
					}
				}
				half := len(sizes) - len(sizes)/2
				if linger > 0 && full != half {
					t.Errorf("linger: batch sizes %v: later batches should carry all 8 callers", sizes)
				}
				if linger == 0 && full == half {
					t.Errorf("no linger: batch sizes %v: expected cohorts (the test would not show linger's effect)", sizes)
				}
			})
		}
	})
	t.Run("lone caller", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			var wg sync.WaitGroup
			var mu sync.Mutex
			var sizes []int
			b := newBatcher(&wg, &sizes, &mu)
			for range 5 {
				start := time.Now()
				p := newProposal(context.Background(), fsm.Tick{})
				b.submit(p)
				p.wait()
				if d := time.Since(start); d != commit {
					t.Fatalf("a lone caller took %v, want exactly one commit (%v)", d, commit)
				}
			}
			wg.Wait()
			b.close()
		})
	})
	t.Run("bounded", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			var wg sync.WaitGroup
			var mu sync.Mutex
			var sizes []int
			b := newBatcher(&wg, &sizes, &mu)
			// A batch of 4 whose callers never come back, then one proposal
			// arriving right after: it waits for the linger (a quarter of
			// the commit, at most maxLinger), not for callers that never come.
			var first []*proposal
			for range 4 {
				first = append(first, newProposal(context.Background(), fsm.Tick{}))
			}
			b.submit(first...)
			first[0].wait()
			start := time.Now()
			p := newProposal(context.Background(), fsm.Tick{})
			b.submit(p)
			p.wait()
			if d, want := time.Since(start), commit+min(commit/4, maxLinger); d != want {
				t.Fatalf("after a batch of 4, a lone proposal took %v, want linger+commit = %v (batches %v)", d, want, sizes)
			}
			// Close during a linger fails nothing that was not pending and
			// leaves no timer behind.
			for range 3 {
				b.submit(newProposal(context.Background(), fsm.Tick{}))
			}
			wg.Wait()
			b.close()
			if b.timer != nil {
				t.Fatal("linger timer left after close")
			}
		})
	})
}
