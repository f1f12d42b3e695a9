package floorsys

import (
	"encoding/binary"
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
// entry waits until as many commands are queued as the last entry answered
// callers (a Lock put in line is not answered; a waiter it granted is)
// plus those queued when it finished — its callers back, each with its
// next command — or gatherWait has passed. It runs on every replica and
// refuses commands (resFailed) while its replica is not the leader.
//
// A Lock of a held name is parked, not answered: the entry's result says
// resQueued, and the caller (local, or the follower's forwarded call) gets
// its resOK when a later entry's Unlock grants the name to its waiter id —
// the hand-off's one message to the waiter's replica is that deferred
// reply. Parked waiters live in this leader's memory only: when it stops
// being the leader or closes they are failed (resFailed), and a waiter
// whose caller gave up keeps its place in line (the floor has no sessions
// to end it), so a name granted to it stays held.
type groupCommit struct {
	r      *raft.Raft
	fsm    *heldNames // read for onlyLining
	idBase uint64     // this replica's waiter ids: idBase | a counter

	mu     sync.Mutex
	queue  []waiter
	closed bool
	kick   chan struct{} // a token: something was queued

	// The run goroutine's only:
	nextID uint64
	parked map[uint64]waiter // waiter id → a Lock in line
}

// newGroupCommit returns replica index's group commit (index < 256) over
// its state machine.
func newGroupCommit(r *raft.Raft, fsm *heldNames, index int) *groupCommit {
	return &groupCommit{r: r, fsm: fsm, idBase: uint64(index) << 56, kick: make(chan struct{}, 1), parked: map[uint64]waiter{}}
}

// submit queues a command; done is called once with its result.
func (g *groupCommit) submit(w waiter) {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		finishAll([]waiter{w})
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
	var lastCommit time.Duration
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
		if g.onlyLining() {
			t := time.NewTimer(min(lastCommit, gatherWait))
			ok := g.hold(t.C, stop)
			t.Stop()
			if !ok {
				return
			}
		}
		start := time.Now()
		woken := g.commit(g.take())
		lastCommit = time.Since(start)
		want = min(woken+g.queued(), maxBatch)
	}
}

// onlyLining reports whether every queued command is a Lock of a name held
// in the leader's state: one that would only join a line. As raftlock's
// proposer (node/batcher_defer.go), the leader holds such a batch back
// until another command comes (the Unlock that hands the name on, after
// which both leave in one entry) or for the last commit's time (at most
// gatherWait): otherwise the previous holder's Lock, sent the moment its
// Unlock is answered, would leave alone and the new holder's Unlock would
// wait a whole commit behind it.
func (g *groupCommit) onlyLining() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, w := range g.queue {
		if w.cmd[0] != opLock || !g.fsm.wouldQueue(commandName(&w.cmd)) {
			return false
		}
	}
	return len(g.queue) > 0
}

// hold waits while onlyLining holds, until timeout fires (true), or stop
// closes (false).
func (g *groupCommit) hold(timeout <-chan time.Time, stop <-chan struct{}) bool {
	return g.waitWhile(g.onlyLining, timeout, stop)
}

// gather waits until want commands are queued or timeout fires (true), or
// stop closes (false).
func (g *groupCommit) gather(want int, timeout <-chan time.Time, stop <-chan struct{}) bool {
	return g.waitWhile(func() bool { return g.queued() < want }, timeout, stop)
}

// waitWhile re-checks cond at every kick while it holds, until timeout
// fires (true) or stop closes (false).
func (g *groupCommit) waitWhile(cond func() bool, timeout <-chan time.Time, stop <-chan struct{}) bool {
	for cond() {
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

// commit proposes batch as one entry (each Lock given a waiter id) and
// hands each command its result, parking the Locks put in line and waking
// the waiters the entry's Unlocks granted. It returns how many callers it
// answered (each may come back with its next command).
func (g *groupCommit) commit(batch []waiter) (woken int) {
	data := make([]byte, 0, len(batch)*cmdSize)
	ids := make([]uint64, len(batch))
	for i := range batch {
		if batch[i].cmd[0] == opLock {
			g.nextID++
			ids[i] = g.idBase | g.nextID
			binary.BigEndian.PutUint64(batch[i].cmd[idAt:], ids[i])
		}
		data = append(data, batch[i].cmd[:]...)
	}
	var out *applied
	if g.r.State() == raft.Leader {
		f := g.r.Apply(data, applyTimeout)
		if f.Error() == nil {
			out, _ = f.Response().(*applied)
		}
	}
	if out == nil { // not committed, or no longer the leader
		finishAll(batch)
		return len(batch) + g.failParked()
	}
	var outs []*frameWriter // a few: one per follower connection
	wake := func(w waiter, r byte) {
		woken++
		w.done(r)
		if w.out != nil && !slices.Contains(outs, w.out) {
			outs = append(outs, w.out)
		}
	}
	for i, w := range batch {
		r := byte(resFailed)
		if i < len(out.res) {
			r = out.res[i]
		}
		if r == resQueued {
			g.parked[ids[i]] = w
			continue
		}
		wake(w, r)
	}
	for _, id := range out.grants {
		if w, ok := g.parked[id]; ok {
			delete(g.parked, id)
			wake(w, resOK)
		}
	}
	for _, o := range outs { // an entry's replies to one follower leave in one write
		o.flush()
	}
	return woken
}

// failParked fails every parked waiter and returns how many there were.
func (g *groupCommit) failParked() int {
	parked := make([]waiter, 0, len(g.parked))
	for id, w := range g.parked {
		parked = append(parked, w)
		delete(g.parked, id)
	}
	finishAll(parked)
	return len(parked)
}

// finishAll fails every waiter of batch (resFailed), then wakes the writers
// of the forwarded ones, each once.
func finishAll(batch []waiter) {
	var outs []*frameWriter
	for _, w := range batch {
		w.done(resFailed)
		if w.out != nil && !slices.Contains(outs, w.out) {
			outs = append(outs, w.out)
		}
	}
	for _, o := range outs {
		o.flush()
	}
}

// close fails what is queued and parked (the run goroutine's, as it ends).
func (g *groupCommit) close() {
	g.mu.Lock()
	g.closed = true
	queue := g.queue
	g.queue = nil
	g.mu.Unlock()
	finishAll(queue)
	g.failParked()
}
