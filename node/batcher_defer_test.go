package node

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raftlock/raftlock/fsm"
)

// deferBatcher is a proposer-like batcher whose commits take commit and
// whose deferrable proposals are the Acquires. It records each batch's
// size and start time.
type deferBatcher struct {
	*batcher
	mu     sync.Mutex
	sizes  []int
	starts []time.Duration
	t0     time.Time
}

func newDeferBatcher(wg *sync.WaitGroup, commit time.Duration) *deferBatcher {
	d := &deferBatcher{t0: time.Now()}
	d.batcher = &batcher{max: 100, inflight: 1, wg: wg, lingerFrac: proposerLinger,
		deferrable: func(c fsm.Command) bool { _, ok := c.(fsm.Acquire); return ok },
		run: func(batch []*proposal) {
			d.mu.Lock()
			d.sizes = append(d.sizes, len(batch))
			d.starts = append(d.starts, time.Since(d.t0))
			d.mu.Unlock()
			time.Sleep(commit)
			for _, p := range batch {
				p.finish(outcome{index: 1})
			}
		}}
	return d
}

func (d *deferBatcher) propose(cmd fsm.Command) *proposal {
	p := newProposal(context.Background(), cmd)
	d.submit(p)
	return p
}

// inBubble runs f on fake time with a deferBatcher that has committed one
// batch (which sets the hold's length), then waits for its batches and
// closes it.
func inBubble(t *testing.T, commit time.Duration, f func(t *testing.T, d *deferBatcher)) {
	synctest.Test(t, func(t *testing.T) {
		var wg sync.WaitGroup
		d := newDeferBatcher(&wg, commit)
		d.propose(fsm.Tick{}).wait()
		f(t, d)
		d.close()
		wg.Wait()
	})
}

// A batch of only deferrable proposals waits for a proposal that is not
// deferrable, and they leave together; with none coming, it leaves after
// the last batch's commit time. Proposals that are not deferrable never
// wait.
func TestBatcherHoldsBackDeferrable(t *testing.T) {
	const commit = 8 * time.Millisecond
	const gap = maxLinger / 2 // the Release comes within the hold
	acquire := fsm.Acquire{Lock: "x", Wait: true}
	t.Run("until company", func(t *testing.T) {
		inBubble(t, commit, func(t *testing.T, d *deferBatcher) {
			a := d.propose(acquire)
			time.Sleep(gap)
			r := d.propose(fsm.Release{Lock: "x"})
			a.wait()
			r.wait()
			if len(d.sizes) != 2 || d.sizes[1] != 2 {
				t.Fatalf("batches %v: the held-back Acquire should leave with the Release", d.sizes)
			}
			if got := d.starts[1] - d.starts[0]; got != commit+gap {
				t.Fatalf("second batch left %v after the first, want %v (when the Release came)", got, commit+gap)
			}
		})
	})
	t.Run("until the hold ends", func(t *testing.T) {
		inBubble(t, commit, func(t *testing.T, d *deferBatcher) {
			start := time.Now()
			d.propose(acquire).wait()
			// Held for min(last commit, maxLinger), then its own commit.
			if got, want := time.Since(start), min(commit, maxLinger)+commit; got != want {
				t.Fatalf("a lone deferrable Acquire took %v, want %v", got, want)
			}
		})
	})
	t.Run("not deferrable", func(t *testing.T) {
		inBubble(t, commit, func(t *testing.T, d *deferBatcher) {
			start := time.Now()
			d.propose(fsm.Release{Lock: "x"}).wait()
			if got := time.Since(start); got != commit {
				t.Fatalf("a Release took %v, want its commit %v: it must not be held", got, commit)
			}
		})
	})
	t.Run("inline", func(t *testing.T) {
		inBubble(t, commit, func(t *testing.T, d *deferBatcher) {
			p := newProposal(context.Background(), acquire)
			d.runInline([]*proposal{p}, nil) // held: returns without running it
			select {
			case <-p.done:
				t.Fatal("runInline ran a deferrable proposal at once")
			default:
			}
			d.propose(fsm.Tick{}).wait()
			p.wait()
			if len(d.sizes) != 2 || d.sizes[1] != 2 {
				t.Fatalf("batches %v: the inline Acquire should have waited for the Tick", d.sizes)
			}
		})
	})
	t.Run("closed", func(t *testing.T) {
		inBubble(t, commit, func(t *testing.T, d *deferBatcher) {
			p := d.propose(acquire)
			d.close()
			if out := p.wait(); out.err == nil {
				t.Fatal("a held-back proposal survived close")
			}
		})
	})
}

// A batch whose proposals, but one, only queue sets no linger: on a
// contended lock the batch of a Release and the previous holder's
// re-Acquire is followed by the next holder's Release alone, which must
// leave as soon as it comes rather than wait for a second caller.
func TestBatcherNoLingerForQueuedAcquires(t *testing.T) {
	const commit = 8 * time.Millisecond
	const gap = 100 * time.Microsecond // the next holder's Release comes
	for _, second := range []fsm.Command{fsm.Acquire{Lock: "x", Wait: true}, fsm.Release{Lock: "y"}} {
		inBubble(t, commit, func(t *testing.T, d *deferBatcher) {
			busy := d.propose(fsm.Tick{}) // the Release and the re-Acquire gather behind it
			r := d.propose(fsm.Release{Lock: "x"})
			a := d.propose(second)
			busy.wait()
			r.wait()
			a.wait()
			time.Sleep(gap)
			d.propose(fsm.Release{Lock: "x"}).wait()
			n := len(d.sizes)
			if n != 4 || d.sizes[2] != 2 {
				t.Fatalf("batches %v: want the Release and the %s in one batch, then the next Release", d.sizes, fsm.OpOf(second))
			}
			got := d.starts[3] - (d.starts[2] + commit)
			want := gap // no linger: a queued Acquire's caller does not come back
			if _, release := second.(fsm.Release); release {
				want = min(time.Duration(proposerLinger*float64(commit)), maxLinger) // two callers expected back: the linger runs out
			}
			if got != want {
				t.Fatalf("after a batch of a Release and a %s the next Release left %v after it, want %v", fsm.OpOf(second), got, want)
			}
		})
	}
}
