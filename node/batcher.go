package node

import (
	"context"
	"sync"

	"github.com/raftlock/raftlock/fsm"
)

// proposal is one command waiting for its outcome.
type proposal struct {
	ctx  context.Context // the caller's: a proposal whose ctx ended before its batch left is dropped
	cmd  fsm.Command
	out  outcome
	done chan struct{}
}

func newProposal(ctx context.Context, cmd fsm.Command) *proposal {
	return &proposal{ctx: ctx, cmd: cmd, done: make(chan struct{})}
}

func (p *proposal) finish(o outcome) {
	p.out = o
	close(p.done)
}

// batcher is group commit: it gathers concurrent proposals and hands them to
// run in batches of at most max, with at most inflight batches running at a
// time — whatever arrives while that many run forms the next batch. It
// starts a goroutine per batch, and none while there is no work.
type batcher struct {
	max      int
	inflight int                     // batches running at once (at least 1)
	run      func(batch []*proposal) // must finish every proposal
	wg       *sync.WaitGroup

	mu      sync.Mutex
	pending []*proposal
	running int
	closed  bool
}

// submit queues proposals; they are finished with ErrClosed if the batcher
// is closed.
func (b *batcher) submit(ps ...*proposal) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		for _, p := range ps {
			p.finish(outcome{err: ErrClosed})
		}
		return
	}
	b.pending = append(b.pending, ps...)
	b.startLocked()
}

// startLocked starts batches while there is work and room for them.
func (b *batcher) startLocked() {
	for b.running < max(b.inflight, 1) {
		batch := b.takeLocked()
		if len(batch) == 0 {
			return
		}
		b.running++
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			b.run(batch)
			b.mu.Lock()
			b.running--
			b.startLocked()
			b.mu.Unlock()
		}()
	}
}

// takeLocked removes the next batch from pending. Proposals whose caller has
// given up are finished at once instead: nobody waits for them, so they are
// not proposed.
func (b *batcher) takeLocked() []*proposal {
	var batch []*proposal
	n := 0
	for _, p := range b.pending {
		if len(batch) == b.max {
			break
		}
		n++
		if p.ctx.Err() != nil {
			p.finish(outcome{err: p.ctx.Err()})
			continue
		}
		batch = append(batch, p)
	}
	b.pending = append(b.pending[:0], b.pending[n:]...)
	return batch
}

// idle reports whether no proposal is waiting for the next batch.
func (b *batcher) idle() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.pending) == 0
}

// close fails what is pending with ErrClosed and refuses what comes next. It
// does not wait for a batch in flight (the caller waits on the WaitGroup).
func (b *batcher) close() {
	b.mu.Lock()
	b.closed = true
	pending := b.pending
	b.pending = nil
	b.mu.Unlock()
	for _, p := range pending {
		p.finish(outcome{err: ErrClosed})
	}
}

// wait returns the proposal's outcome, or the context's error if it ends
// first (then the outcome is unknown: the command may still commit).
func (p *proposal) wait() outcome {
	select {
	case <-p.done:
		return p.out
	case <-p.ctx.Done():
		return outcome{err: errUnknown{p.ctx.Err()}}
	}
}

// errUnknown: the caller's context ended while its command was on its way;
// it may or may not have committed.
type errUnknown struct{ err error }

func (e errUnknown) Error() string { return "outcome unknown: " + e.err.Error() }
func (e errUnknown) Unwrap() error { return e.err }
