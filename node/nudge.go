package node

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/raftlock/raftlock/fsm"
)

// Commit nudges. A follower applies an entry once it learns that the entry
// committed, and it learns that only from the leader's next AppendEntries:
// the next batch, or raft's CommitTimeout tick when no batch follows. The
// tick is long (Timing.CommitTimeout, LANTiming: 500 ms), so that an idle
// cluster does not send an empty AppendEntries to every follower every few
// milliseconds (measured: a third of an idle node's CPU). A replica that
// waits for an index its Raft does not yet know committed — waitApplied
// after a forwarded apply (OpenSession, CloseSession), Sync — asks the
// leader for a nudge instead: the leader proposes a Noop. The AppendEntries
// that carries it (or any batch that leaves after the nudge arrived, which
// the Noop joins under load) carries the leader's commit index, which
// covers the index waited for: the leader had committed it before the
// follower could learn of it.
//
// The leader also flushes on its own: when its log goes quiet (no entry
// for flushDelay) after an entry that was not a Noop (nor only Renewed
// records, see onlyNoops), it proposes one Noop,
// so that followers apply what the last entries did within milliseconds
// without anyone asking — a Subscription on a follower (an Election
// observer, a lease watch) sees a release as promptly as with a short
// tick. Under load the next batch carries the commit index anyway and no
// flush is written; an idle cluster writes nothing (a Noop is never
// followed by a flush).
//
// Nudges are best effort and coalesced: a follower has one nudge in flight
// at a time (asking for the highest index wanted), and the leader's
// proposer puts concurrent Noops in one entry. A nudge that is lost, or refused by a
// leader of the previous release (unknown request kind), costs only time:
// the tick still comes.
//
//	nudge request: v, kindCommitNudge, index
//	nudge reply:   v, kindCommitNudge
type nudger struct {
	h nudgerHost

	mu     sync.Mutex
	want   uint64 // follower: the highest index a waiter asked for
	asking bool   // follower: a nudge RPC is in flight
	// leader: the indexes of the last entries it committed that carry
	// nothing but Noops (a ring; 0: none). A committed entry never changes,
	// so these stay true whoever leads later.
	noops [4]uint64
	next  int
	// leader: flush of the commit index when the log goes quiet
	entries uint64      // entries committed that were not Noops only
	last    uint64      // the highest index of those
	flush   *time.Timer // armed: a flush is due unless entries moves
	flushed uint64      // entries when the timer was armed
	gen     uint64      // the armed timer's generation (a stopped one's callback is void)
}

// flushDelay is how long the leader's log must be quiet after an entry
// before the leader flushes its commit index to the followers with a Noop.
const flushDelay = 5 * time.Millisecond

const kindCommitNudge byte = 6

// nudgerHost is what the nudger needs of its node.
type nudgerHost struct {
	ctx       context.Context // ends when the node closes
	wg        *sync.WaitGroup
	committed func() uint64                               // this replica's Raft commit index
	call      func(ctx context.Context, req []byte) error // one RPC to the leader
	submit    func(cmd fsm.Command)                       // on the leader: propose, not waiting
}

func (n *Node) nudgerHost() nudgerHost {
	return nudgerHost{
		ctx: n.ctx, wg: &n.wg,
		committed: func() uint64 { return n.raft.CommitIndex() },
		call: func(ctx context.Context, req []byte) error {
			_, err := n.callLeader(ctx, req)
			return err
		},
		submit: func(cmd fsm.Command) {
			if n.haltErr() == nil { // the batch's raft.Apply is bounded by AttemptTimeout
				n.proposer.submit(newProposal(n.ctx, cmd))
			}
		},
	}
}

// awaitApplied waits until the local FSM applied index (or ctx ends),
// nudging the leader if this replica's Raft does not know the index
// committed yet.
func (n *Node) awaitApplied(ctx context.Context, index uint64) error {
	if n.applied.get() >= index {
		return nil
	}
	if n.raft.State() != raft.Leader {
		n.nudges.ask(index)
	}
	return n.applied.wait(ctx, index)
}

// ask makes sure a nudge for index is sent, unless this replica already
// knows it committed. It does not wait.
func (u *nudger) ask(index uint64) {
	if u.h.committed() >= index {
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	u.want = max(u.want, index)
	if u.asking || u.h.ctx.Err() != nil {
		return // the loop sends again once the nudge in flight returns
	}
	u.asking = true
	u.h.wg.Add(1)
	go u.askLoop()
}

// askLoop sends nudges while a wanted index is not known committed.
func (u *nudger) askLoop() {
	defer u.h.wg.Done()
	var sent uint64
	for {
		u.mu.Lock()
		want := u.want
		if want <= sent || u.h.committed() >= want || u.h.ctx.Err() != nil {
			u.asking = false
			u.mu.Unlock()
			return
		}
		u.mu.Unlock()
		u.h.call(u.h.ctx, encodeNudgeRequest(want)) // best effort
		sent = want
	}
}

// nudged is the leader's side: propose a Noop. It does not wait: the Noop
// joins the proposer's next batch (concurrent Noops share one entry), whose
// goroutine the proposer owns — nothing here outlives the node's close.
func (u *nudger) nudged() {
	if u.h.ctx.Err() == nil {
		u.h.submit(fsm.Noop{}) // best effort: a failure leaves the tick
	}
}

// committed notes a committed entry (at index) that was not Noops only,
// and arms the flush.
func (u *nudger) committed(index uint64) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.entries++
	u.last = max(u.last, index)
	if u.flush == nil {
		u.flushed = u.entries
		u.gen++
		gen := u.gen
		u.flush = time.AfterFunc(flushDelay, func() { u.flushIfQuiet(gen) })
	}
}

// flushIfQuiet proposes the flush Noop if no entry came since the timer
// was armed, and waits again otherwise. A callback of a timer that was
// stopped or replaced meanwhile (gen) does nothing.
func (u *nudger) flushIfQuiet(gen uint64) {
	u.mu.Lock()
	if u.flush == nil || u.gen != gen {
		u.mu.Unlock()
		return
	}
	if u.h.ctx.Err() != nil {
		u.flush = nil
		u.mu.Unlock()
		return
	}
	if u.entries != u.flushed {
		u.flushed = u.entries
		u.flush.Reset(flushDelay)
		u.mu.Unlock()
		return
	}
	u.flush = nil
	u.mu.Unlock()
	u.nudged()
}

// committedNoops records that the entry at index, committed by this leader,
// carries Noops only; a flush armed before it is not needed any more.
func (u *nudger) committedNoops(index uint64) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.committedNoopsLocked(index)
}

func (u *nudger) committedNoopsLocked(index uint64) {
	if u.flush != nil && index > u.last {
		// This Noop's AppendEntries carried the commit index of every entry
		// committed so far: no flush needed.
		u.flush.Stop()
		u.flush = nil
	}
	u.noops[u.next] = index
	u.next = (u.next + 1) % len(u.noops)
}

// readIndex is the read index a Sync may wait for given the commit index:
// below the trailing entries known to carry Noops only. They change nothing
// a read can see (a Noop leaves locks, sessions and values as they are),
// and a follower learns that they committed only with the leader's next
// entry — the next nudge's Noop. Without this step, every Sync on a
// follower of an idle cluster would wait for the previous Sync's Noop and
// propose one more, for ever one entry behind.
func (u *nudger) readIndex(commit uint64) uint64 {
	u.mu.Lock()
	defer u.mu.Unlock()
	for commit > 0 && slices.Contains(u.noops[:], commit) {
		commit--
	}
	return commit
}

func encodeNudgeRequest(index uint64) []byte { return encodeIndexRequest(kindCommitNudge, index) }

func decodeNudgeRequest(b []byte) (uint64, error) { return decodeIndexRequest(b, kindCommitNudge) }

func encodeNudgeReply() []byte { return []byte{wireVersion, kindCommitNudge} }

// onlyNoops reports whether a batch carries nothing a read or a
// subscription sees: Noops, and the leader's Renewed records (which only
// the next leader's takeover reads, after its own barrier) — so that a
// failover's renewals, like Noops, neither call for a flush nor hold a
// follower's Sync back.
func onlyNoops(cmds []fsm.Command) bool {
	for _, c := range cmds {
		switch c.(type) {
		case fsm.Noop, fsm.Renewed:
		default:
			return false
		}
	}
	return len(cmds) > 0
}
