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
// run in batches of at most max, with one batch in flight at a time —
// everything that arrives while a batch runs forms the next one. It starts a
// goroutine only while there is work.
type batcher struct {
	max int
	run func(batch []*proposal) // must finish every proposal
	wg  *sync.WaitGroup

	mu      sync.Mutex
	pending []*proposal
	running bool
	closed  bool
}

// submit queues proposals; they are finished with ErrClosed if the batcher
// is closed.
func (b *batcher) submit(ps ...*proposal) {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		for _, p := range ps {
			p.finish(outcome{err: ErrClosed})
		}
		return
	}
	b.pending = append(b.pending, ps...)
	if !b.running {
		b.running = true
		b.wg.Add(1)
		go b.loop()
	}
	b.mu.Unlock()
}

func (b *batcher) loop() {
	defer b.wg.Done()
	for {
		b.mu.Lock()
		var batch []*proposal
		n := 0
		for _, p := range b.pending {
			if len(batch) == b.max {
				break
			}
			n++
			if p.ctx.Err() != nil {
				p.finish(outcome{err: p.ctx.Err()}) // nobody waits for it: do not propose it
				continue
			}
			batch = append(batch, p)
		}
		b.pending = append(b.pending[:0], b.pending[n:]...)
		if len(batch) == 0 && len(b.pending) == 0 {
			b.running = false
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()
		if len(batch) > 0 {
			b.run(batch)
		}
	}
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
