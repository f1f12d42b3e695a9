package node

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/raftlock/raftlock/fsm"
)

// runInline runs a batch on the caller's goroutine only when the batcher
// is idle; while a batch runs (no free slot) the proposals queue and form
// the next batch, run by a batch goroutine; proposals whose ctx ended are
// not run.
func TestBatcherRunInline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var wg sync.WaitGroup
		var mu sync.Mutex
		var sizes []int
		release := make(chan struct{})
		b := &batcher{max: 100, inflight: 1, wg: &wg, run: func(batch []*proposal) {
			mu.Lock()
			sizes = append(sizes, len(batch))
			mu.Unlock()
			<-release
			for _, p := range batch {
				p.finish(outcome{index: 2})
			}
		}}
		ctx := context.Background()

		// Idle: the caller runs it, with its own run function.
		p := newProposal(ctx, fsm.Tick{})
		ranBy := ""
		b.runInline([]*proposal{p}, func(batch []*proposal) {
			ranBy = "caller"
			batch[0].finish(outcome{index: 1})
		})
		select {
		case <-p.done:
		default:
			t.Fatal("runInline on an idle batcher returned before its proposal finished")
		}
		if ranBy != "caller" || p.out.index != 1 {
			t.Fatalf("idle batcher: ran by %q, outcome %+v; want the caller's run", ranBy, p.out)
		}

		// Busy: a batch goroutine holds the only slot; runInline queues.
		first := newProposal(ctx, fsm.Tick{})
		b.submit(first)
		synctest.Wait() // the batch goroutine is blocked in run
		q := newProposal(ctx, fsm.Tick{})
		b.runInline([]*proposal{q}, func([]*proposal) { t.Error("ran inline while the batcher was busy") })
		select {
		case <-q.done:
			t.Fatal("a queued proposal finished before the running batch")
		default:
		}
		close(release)
		if out := q.wait(); out.err != nil || out.index != 2 {
			t.Fatalf("queued proposal: %+v, want it run by the next batch", out)
		}
		wg.Wait()
		if len(sizes) != 2 || sizes[0] != 1 || sizes[1] != 1 {
			t.Fatalf("batches %v, want [1 1]", sizes)
		}

		// A proposal whose caller gave up is never run.
		gone, cancel := context.WithCancel(ctx)
		cancel()
		r := newProposal(gone, fsm.Tick{})
		b.runInline([]*proposal{r}, func([]*proposal) { t.Error("ran an abandoned proposal") })
		if out := r.wait(); !errors.Is(out.err, ErrNotProposed) {
			t.Fatalf("abandoned proposal: %v, want ErrNotProposed", out.err)
		}
	})
}
