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
