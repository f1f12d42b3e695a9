package limits

import (
	"context"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/raftlock/raftlock/bench/internal/report"
	"github.com/raftlock/raftlock/bench/internal/stats"
)

// maxBatch bounds the commands of one batched entry (raftlock's own batcher
// packs up to a few hundred).
const maxBatch = 512

// gatherWait bounds how long a gathering batcher waits for every worker.
const gatherWait = time.Millisecond

// gatherWay is how a batcher waits before it packs an entry.
type gatherWay struct {
	gather bool // wait until every worker's command is queued (at most gatherWait)
	woken  bool // while gathering, wake on each push rather than poll every pollEvery
}

// pollEvery is how often a polling gatherer looks at the queue.
const pollEvery = 10 * time.Microsecond

// gatherWays are the ways every worker count and depth is measured: greedy,
// gathering by polling, gathering woken by each push. Neither gather is
// best everywhere: polling wins with few workers (a wake-up per push costs
// more than a 10 µs sleep), waking wins with many.
var gatherWays = []gatherWay{{}, {gather: true}, {gather: true, woken: true}}

// BatchedRaft measures the bare cluster under an ideal group commit. For
// each number of workers, each depth and each of gatherWays, that many
// closed-loop workers (one command in flight each, in the leader's process,
// no forwarding, no state machine) hand their 64-byte commands to a batcher
// that packs the queued commands into one Raft entry whenever fewer than
// depth entries are in flight: at once (greedy), or once every worker's
// command is queued (gather, at most gatherWait). Nothing a lock service
// built on this Raft and this disk adds to a command (a forward from a
// follower, a linger's guess, a state machine, the answer's way back) is in
// it, so the best of these rates is an upper bound, on this machine, for
// such a service with that many one-command-at-a-time workers.
func BatchedRaft(ctx context.Context, dir, store string, workers, depths []int, d time.Duration) ([]report.BatchedLimit, error) {
	c, err := startRaft(ctx, dir, store, 3)
	if err != nil {
		return nil, err
	}
	defer c.shutdown()
	var out []report.BatchedLimit
	for _, n := range workers {
		for _, depth := range depths {
			for _, way := range gatherWays {
				if err := ctx.Err(); err != nil {
					return out, err
				}
				leader, err := c.leader(ctx)
				if err != nil {
					return out, err
				}
				l := measureBatched(leader, n, depth, way, d)
				l.Store = store
				out = append(out, l)
			}
		}
	}
	return out, nil
}

// batchQueue is the ideal batcher's queue of waiting workers.
type batchQueue struct {
	mu      sync.Mutex
	waiting []chan struct{}
	ready   chan struct{} // a token: the queue became non-empty or a slot freed
}

func (q *batchQueue) push(done chan struct{}) {
	q.mu.Lock()
	q.waiting = append(q.waiting, done)
	q.mu.Unlock()
	q.kick()
}

func (q *batchQueue) kick() {
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

func (q *batchQueue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.waiting)
}

// gatherWoken waits until n workers are queued, gatherWait has passed or
// stop is closed (then false), waking on each push. It leaves a push's
// token in ready for the dispatcher when it returns early.
func (q *batchQueue) gatherWoken(n int, stop <-chan struct{}) bool {
	t := time.NewTimer(gatherWait)
	defer t.Stop()
	for q.len() < n {
		select {
		case <-q.ready:
		case <-t.C:
			return true
		case <-stop:
			return false
		}
	}
	return true
}

// take removes up to maxBatch waiting workers.
func (q *batchQueue) take() []chan struct{} {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := min(len(q.waiting), maxBatch)
	if n == 0 {
		return nil
	}
	out := make([]chan struct{}, n)
	copy(out, q.waiting)
	q.waiting = append(q.waiting[:0], q.waiting[n:]...)
	return out
}

type batchInFlight struct {
	f       raft.ApplyFuture
	waiters []chan struct{}
}

// measureBatched runs n workers through the ideal batcher with depth
// entries in flight for d.
func measureBatched(r *raft.Raft, n, depth int, way gatherWay, d time.Duration) report.BatchedLimit {
	q := &batchQueue{ready: make(chan struct{}, 1)}
	slots := make(chan struct{}, depth)
	flights := make(chan batchInFlight, depth)
	stop := make(chan struct{})
	var entries, commands int64
	var helpers sync.WaitGroup
	helpers.Go(func() { // the dispatcher: one entry per slot, greedy
		defer close(flights)
		for {
			select {
			case slots <- struct{}{}:
			case <-stop:
				return
			}
			var batch []chan struct{}
			switch {
			case way.woken:
				if !q.gatherWoken(n, stop) {
					return
				}
			case way.gather:
				deadline := time.Now().Add(gatherWait)
				for q.len() < n && time.Now().Before(deadline) {
					time.Sleep(pollEvery)
				}
			}
			for batch == nil {
				if batch = q.take(); batch != nil {
					break
				}
				select {
				case <-q.ready:
				case <-stop:
					return
				}
			}
			entry := make([]byte, len(command)*len(batch))
			flights <- batchInFlight{f: r.Apply(entry, 5*time.Second), waiters: batch}
			entries++
			commands += int64(len(batch))
		}
	})
	helpers.Go(func() { // the completer: Raft answers in log order
		for fl := range flights {
			fl.f.Error() // an error only delays the workers: the rate counts answers
			<-slots
			for _, w := range fl.waiters {
				w <- struct{}{}
			}
		}
	})
	all, elapsed := closedLoop(n, d, func() bool {
		done := make(chan struct{}, 1)
		q.push(done)
		<-done
		return true
	})
	close(stop)
	helpers.Wait()
	l := report.BatchedLimit{
		Workers:        n,
		Depth:          depth,
		Gather:         way.gather,
		Woken:          way.woken,
		CommandsPerSec: float64(len(all)) / elapsed.Seconds(),
		Latency:        stats.Summarize(all),
	}
	if entries > 0 {
		l.CommandsPerEntry = float64(commands) / float64(entries)
	}
	return l
}
