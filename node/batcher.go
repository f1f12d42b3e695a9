package node

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/raftlock/raftlock/fsm"
)

// proposal is one command waiting for its outcome.
type proposal struct {
	ctx context.Context // the caller's: a proposal whose ctx ended before its batch left is dropped
	cmd fsm.Command
	// restore is set (and cmd nil) on a restore below cluster version 4
	// (proposeRestore): the proposer runs it between two entries.
	restore *restoreCmd
	out     outcome
	done    chan struct{}

	mu sync.Mutex
	in *batcher // the batcher it was submitted to

	deferrable bool // set by classify (submit, runInline) from batcher.deferrable (batcher_defer.go)

	// origin is who proposed the command, for the leader's announcements
	// (announce_route.go): "" this node, else the forwarding peer's Raft id
	// (originOf) or originUnknown.
	origin string
	// from is the node a forwarded command came from, as the leader stamps
	// it on an OpenSession (requester); "" for this node's own commands.
	from string
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
//
// Linger (when lingerFrac > 0): callers in a closed loop (lock, unlock, lock
// again) answered by one batch come back a moment after it finishes. If the
// next batch left with only the proposals already waiting, the callers would
// split into cohorts that alternate batches, each batch carrying a fraction of
// them. So when a batch of several proposals finishes and fewer than (its
// returning callers + those waiting) are pending, the next batch waits for
// that many, but never longer than lingerFrac of the finished batch's run
// time (capped by maxLinger). A lone caller never waits: a batch of one
// sets no linger, nor does a batch whose other proposals only queue.
//
// Hold (when deferrable is set): a batch made only of deferrable proposals
// waits for one that is not, or for the last batch's run time (at most
// maxLinger); see batcher_defer.go.
type batcher struct {
	max        int
	inflight   int                     // batches running at once (at least 1)
	run        func(batch []*proposal) // must finish every proposal
	wg         *sync.WaitGroup
	lingerFrac float64 // 0: no linger
	// deferrable (nil: none) marks proposals that may wait for company: a
	// batch of only such proposals is held back a while (batcher_defer.go).
	deferrable func(fsm.Command) bool

	mu      sync.Mutex
	pending []*proposal
	running int
	closed  bool
	want    int           // linger: pending count at which the next batch leaves
	timer   *time.Timer   // linger: ends the wait
	lastRun time.Duration // the last batch's run time: the longest a hold lasts (with maxLinger)
	hold    holdBack      // batcher_defer.go
}

// maxLinger bounds the linger of a batcher.
const maxLinger = time.Millisecond

// submit queues proposals; they are finished with ErrClosed if the batcher
// is closed.
func (b *batcher) submit(ps ...*proposal) {
	b.classify(ps)
	b.enqueue(ps)
}

// enqueue is submit for classified proposals.
func (b *batcher) enqueue(ps []*proposal) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		for _, p := range ps {
			p.finish(outcome{err: ErrClosed})
		}
		return
	}
	for _, p := range ps {
		p.mu.Lock()
		p.in = b
		p.mu.Unlock()
	}
	b.pending = append(b.pending, ps...)
	b.startLocked()
}

// runInline runs ps as one batch on the calling goroutine — with run, or
// the batcher's own run if nil — when the batcher is idle: nothing pending,
// no linger, a free slot. A lone caller then skips the hand-off to a batch
// goroutine and back (two goroutine wake-ups per call, most of its
// overhead on a busy machine). Otherwise ps are submitted as by submit.
// Either way every proposal of ps is finished or queued on return; the
// caller waits with proposal.wait, which returns at once if it ran inline.
// Proposals whose ctx has ended are finished with ErrNotProposed, as a
// batch would. run must finish every proposal (it may hand them on).
func (b *batcher) runInline(ps []*proposal, run func(batch []*proposal)) {
	b.classify(ps)
	b.mu.Lock()
	if b.closed || len(b.pending) > 0 || b.want > 0 || b.running >= max(b.inflight, 1) || len(ps) > b.max || allDeferrable(ps) {
		b.mu.Unlock()
		b.enqueue(ps)
		return
	}
	batch := make([]*proposal, 0, len(ps))
	for _, p := range ps {
		if err := p.ctx.Err(); err != nil {
			p.finish(outcome{err: notProposed(err)})
			continue
		}
		batch = append(batch, p)
	}
	if len(batch) == 0 {
		b.mu.Unlock()
		return
	}
	b.running++
	b.wg.Add(1)
	b.mu.Unlock()
	defer b.wg.Done()
	if run == nil {
		run = b.run
	}
	b.runBatch(run, batch)
}

// runBatch runs one batch that holds a slot (running was counted), then
// frees the slot, arms the linger and starts what waits.
func (b *batcher) runBatch(run func(batch []*proposal), batch []*proposal) {
	start := time.Now()
	run(batch)
	took := time.Since(start)
	b.mu.Lock()
	b.running--
	b.lastRun = took
	b.lingerLocked(returning(batch), took)
	b.startLocked()
	b.mu.Unlock()
}

// withdraw takes p out of the pending proposals if it is still there (its
// batch has not left): it then never will be proposed.
func (b *batcher) withdraw(p *proposal) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, q := range b.pending {
		if q == p {
			b.pending = append(b.pending[:i], b.pending[i+1:]...)
			return true
		}
	}
	return false
}

// startLocked starts batches while there is work and room for them, unless
// a linger is waiting for more.
func (b *batcher) startLocked() {
	for b.running < max(b.inflight, 1) {
		if b.want > 0 && len(b.pending) < b.want && !b.closed {
			return
		}
		if b.holdLocked() {
			return
		}
		b.stopLingerLocked()
		b.endHoldLocked()
		batch := b.takeLocked()
		if len(batch) == 0 {
			return
		}
		b.running++
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			b.runBatch(b.run, batch)
		}()
	}
}

// returning counts the proposals of a finished batch whose callers are
// expected back a moment later: all but the deferrable ones (an Acquire
// that queues is followed by its caller's wait for the grant, not by its
// next command). On a contended lock a batch of a Release and the previous
// holder's re-Acquire would otherwise make the next batch wait for two,
// while only the next holder's Release comes.
func returning(batch []*proposal) int {
	n := 0
	for _, p := range batch {
		if !p.deferrable {
			n++
		}
	}
	return n
}

// lingerLocked arms the linger after a batch that ran for took, n of whose
// callers are expected back (returning).
func (b *batcher) lingerLocked(n int, took time.Duration) {
	if b.lingerFrac <= 0 || n < 2 || b.closed || b.timer != nil {
		return
	}
	want := min(n+len(b.pending), b.max)
	if len(b.pending) >= want {
		return
	}
	b.want = want
	var t *time.Timer
	t = time.AfterFunc(min(time.Duration(b.lingerFrac*float64(took)), maxLinger), func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.timer != t {
			return // this linger already ended (its batch left); a later one may be running
		}
		b.want, b.timer = 0, nil
		b.startLocked()
	})
	b.timer = t
}

// stopLingerLocked ends a linger (the batch is leaving).
func (b *batcher) stopLingerLocked() {
	if b.timer != nil {
		b.timer.Stop()
		b.timer = nil
	}
	b.want = 0
}

// takeLocked removes the next batch from pending. Proposals whose caller has
// given up are finished at once instead (ErrNotProposed): nobody waits for
// them, so they are not proposed.
func (b *batcher) takeLocked() []*proposal {
	var batch []*proposal
	n := 0
	for _, p := range b.pending {
		if len(batch) == b.max {
			break
		}
		n++
		if err := p.ctx.Err(); err != nil {
			p.finish(outcome{err: notProposed(err)})
			continue
		}
		batch = append(batch, p)
	}
	b.pending = append(b.pending[:0], b.pending[n:]...)
	return batch
}

// close fails what is pending with ErrClosed and refuses what comes next. It
// does not wait for a batch in flight (the caller waits on the WaitGroup).
func (b *batcher) close() {
	b.mu.Lock()
	b.closed = true
	b.stopLingerLocked()
	b.endHoldLocked()
	pending := b.pending
	b.pending = nil
	b.mu.Unlock()
	for _, p := range pending {
		p.finish(outcome{err: ErrClosed})
	}
}

// wait returns the proposal's outcome, or the context's error if it ends
// first: ErrNotProposed if the proposal was still waiting for its batch (it
// is withdrawn), else errUnknown (the command may still commit).
func (p *proposal) wait() outcome {
	select {
	case <-p.done:
		return p.out
	case <-p.ctx.Done():
	}
	p.mu.Lock()
	b := p.in
	p.mu.Unlock()
	if b != nil && b.withdraw(p) {
		return outcome{err: notProposed(p.ctx.Err())}
	}
	select {
	case <-p.done: // finished meanwhile (dropped as not proposed, say)
		return p.out
	default:
		return outcome{err: errUnknown{p.ctx.Err()}}
	}
}

// notProposed: the caller's context ended before the command's batch left.
func notProposed(ctxErr error) error { return fmt.Errorf("%w: %w", ErrNotProposed, ctxErr) }

// errUnknown: the caller's context ended while its command was on its way;
// it may or may not have committed.
type errUnknown struct{ err error }

func (e errUnknown) Error() string { return "outcome unknown: " + e.err.Error() }
func (e errUnknown) Unwrap() error { return e.err }
