package floorsys

import (
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// maxBatch bounds the commands of one entry (as the in-process ideal's).
const maxBatch = 512

// gatherWait bounds how long the leader waits for the callers of the last
// entry to come back before it sends the next (as the ideal's gatherWait and
// raftlock's maxLinger).
const gatherWait = time.Millisecond

// applyTimeout bounds one raft.Apply.
const applyTimeout = 5 * time.Second

// waiter is a command queued for the next entry and what to do with its
// result.
type waiter struct {
	cmd  [cmdSize]byte
	done func(res byte)
	out  *frameWriter // a forwarded command's: flushed once the entry's results are all added
}

// groupCommit is the leader's group commit: one entry in flight; each next
// entry waits until as many commands are queued as the last entry carried
// plus those queued when it finished — its callers back, each with its
// next command — or gatherWait has passed. It runs on every replica and
// refuses commands (resFailed) while its replica is not the leader.
type groupCommit struct {
	r *raft.Raft

	mu     sync.Mutex
	queue  []waiter
	closed bool
	kick   chan struct{} // a token: something was queued
}

func newGroupCommit(r *raft.Raft) *groupCommit {
	return &groupCommit{r: r, kick: make(chan struct{}, 1)}
}

// submit queues a command; done is called once with its result.
func (g *groupCommit) submit(w waiter) {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		finish([]waiter{w}, nil)
		return
	}
	g.queue = append(g.queue, w)
	g.mu.Unlock()
	select {
	case g.kick <- struct{}{}:
	default:
	}
}

func (g *groupCommit) queued() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.queue)
}

// take removes up to maxBatch queued commands.
func (g *groupCommit) take() []waiter {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := min(len(g.queue), maxBatch)
	batch := append([]waiter(nil), g.queue[:n]...)
	g.queue = append(g.queue[:0], g.queue[n:]...)
	return batch
}

// run commits batches until stop closes, then fails what is queued.
func (g *groupCommit) run(stop <-chan struct{}) {
	defer g.close()
	want := 1
	for {
		// Wait for the first command, then for the rest of the cohort.
		for g.queued() == 0 {
			select {
			case <-g.kick:
			case <-stop:
				return
			}
		}
		if g.queued() < want {
			t := time.NewTimer(gatherWait)
			ok := g.gather(want, t.C, stop)
			t.Stop()
			if !ok {
				return
			}
		}
		batch := g.take()
		g.commit(batch)
		want = min(len(batch)+g.queued(), maxBatch)
	}
}

// gather waits until want commands are queued or timeout fires (true), or
// stop closes (false).
func (g *groupCommit) gather(want int, timeout <-chan time.Time, stop <-chan struct{}) bool {
	for g.queued() < want {
		select {
		case <-g.kick:
		case <-timeout:
			return true
		case <-stop:
			return false
		}
	}
	return true
}

// commit proposes batch as one entry and hands each command its result.
func (g *groupCommit) commit(batch []waiter) {
	data := make([]byte, 0, len(batch)*cmdSize)
	for i := range batch {
		data = append(data, batch[i].cmd[:]...)
	}
	var res []byte
	if g.r.State() == raft.Leader {
		f := g.r.Apply(data, applyTimeout)
		if f.Error() == nil {
			res, _ = f.Response().([]byte)
		}
	}
	finish(batch, res)
}

// finish hands each command of batch its result (resFailed beyond res),
// then wakes the writers of the forwarded ones, each once: an entry's
// replies to one follower leave in one write.
func finish(batch []waiter, res []byte) {
	var outs []*frameWriter // a few: one per follower connection
	for i, w := range batch {
		r := byte(resFailed)
		if i < len(res) {
			r = res[i]
		}
		w.done(r)
		if w.out != nil && !slices.Contains(outs, w.out) {
			outs = append(outs, w.out)
		}
	}
	for _, o := range outs {
		o.flush()
	}
}

func (g *groupCommit) close() {
	g.mu.Lock()
	g.closed = true
	queue := g.queue
	g.queue = nil
	g.mu.Unlock()
	finish(queue, nil)
}
