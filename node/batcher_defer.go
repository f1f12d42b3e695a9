package node

import (
	"time"

	"github.com/raftlock/raftlock/fsm"
)

// Holding back proposals that only queue.
//
// On a contended lock the previous holder asks again the moment its
// Release is answered, while the new holder — told of its grant by the same
// commit — sends its Release a round trip later. With one batch in Raft at
// a time, the re-Acquire would leave alone and the Release would wait a
// whole commit behind it: two commits per hand-off. Yet the re-Acquire
// cannot be granted before that Release anyway; all its batch does is put
// it at the end of the queue.
//
// So a batch made only of deferrable proposals (batcher.deferrable: for
// the proposer, an Acquire that would join a lock's queue in the leader's
// current state, fsm.FSM.WouldQueue) is held back until a proposal that is
// not deferrable arrives — then both leave in one batch — or for as long as
// the last batch took to commit (at most maxLinger), whichever comes first.
// A hand-off then costs one commit and a round trip. Nothing changes in
// what the state machine decides: a held-back Acquire reaches the queue
// later than it might have, never out of order with another deferrable
// one, and the classification is a hint (the state may change before the
// batch is applied; a wrong guess costs at most the hold).
type holdBack struct {
	timer   *time.Timer // ends the hold
	expired bool        // the hold ended: the next batch leaves as it is
}

// classify marks the proposals the batcher may hold back. It reads the
// state (for the proposer) and so runs outside the batcher's lock.
func (b *batcher) classify(ps []*proposal) {
	if b.deferrable == nil {
		return
	}
	for _, p := range ps {
		p.deferrable = b.deferrable(p.cmd)
	}
}

// allDeferrable reports whether every proposal of ps may be held back.
func allDeferrable(ps []*proposal) bool {
	for _, p := range ps {
		if !p.deferrable {
			return false
		}
	}
	return len(ps) > 0
}

// holdLocked reports whether the next batch is held back: everything
// pending is deferrable and the hold (armed here on first use) has not
// ended.
func (b *batcher) holdLocked() bool {
	if b.closed || b.hold.expired || !allDeferrable(b.pending) {
		return false
	}
	if b.hold.timer != nil {
		return true
	}
	d := min(b.lastRun, maxLinger)
	if d <= 0 {
		return false
	}
	var t *time.Timer
	t = time.AfterFunc(d, func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.hold.timer != t {
			return // this hold already ended (its batch left)
		}
		b.hold = holdBack{expired: true}
		b.startLocked()
	})
	b.hold.timer = t
	return true
}

// endHoldLocked ends a hold: the batch is leaving.
func (b *batcher) endHoldLocked() {
	if b.hold.timer != nil {
		b.hold.timer.Stop()
	}
	b.hold = holdBack{}
}

// wouldQueue is the proposer's deferrable: an Acquire that would join the
// lock's queue in this node's applied state. (Commands are values: the
// state machine applies fsm.Acquire, never a pointer to one.)
func (n *Node) wouldQueue(cmd fsm.Command) bool {
	c, ok := cmd.(fsm.Acquire)
	return ok && n.fsm.WouldQueue(c)
}
