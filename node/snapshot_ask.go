package node

import (
	"context"
	"sync"
	"time"
)

// Snapshot asks. hashicorp/raft v1.7.3 installs whatever snapshot a leader
// sends, also one older than what a follower applied: a leader that walked
// back below the follower's log (its appends failed: disk full) sends its
// latest snapshot, which can be older than the follower's applied index and
// than the follower's own snapshots. The FSM refuses it (the state never
// goes back: fsm.ErrOlderSnapshot); raft then keeps its applied index and
// log, answers the leader with an error, and the leader sends its latest
// snapshot again after a backoff — the same one, until it takes a newer.
// So the refusing follower asks the leader to take one now (raft.Snapshot):
// the leader's applied index is at least the follower's once it has
// applied its commit index, which covers everything the follower applied.
//
// Best effort and rate-limited on both sides: a follower asks at most once
// per snapshotAskEvery (one ask in flight); a leader takes at most one
// snapshot per snapshotAskEvery for asks (one in flight), and none while
// its own applied index is below the one asked for (it would be refused
// too). A leader of the previous release answers the unknown kind with an
// error: the follower stays as before (it refuses, the leader retries,
// until the leader's own next snapshot is recent enough).
//
//	snapshot ask:   v, kindSnapshotAsk, applied index of the follower
//	snapshot reply: v, kindSnapshotAsk
const kindSnapshotAsk byte = 7

// snapshotAskEvery bounds the asks of a follower and the snapshots a leader
// takes for them.
const snapshotAskEvery = time.Second

// snapshotAsker holds both sides' state. Goroutine-safe.
type snapshotAsker struct {
	h snapshotAskHost

	mu        sync.Mutex
	asking    bool      // follower: an ask is in flight
	askedAt   time.Time // follower: when the last ask was sent
	snapping  bool      // leader: a snapshot for an ask is being taken
	snappedAt time.Time // leader: when the last one was started
}

// snapshotAskHost is what the asker needs of its node.
type snapshotAskHost struct {
	ctx      context.Context // ends when the node closes
	wg       *sync.WaitGroup
	now      func() time.Time                            // rate limits only
	call     func(ctx context.Context, req []byte) error // one RPC to the leader
	applied  func() uint64                               // the local FSM's applied index
	snapshot func() error                                // raft.Snapshot, waited for
	log      func(msg string, index, applied uint64, err error)
}

func (n *Node) snapshotAskHost() snapshotAskHost {
	return snapshotAskHost{
		ctx: n.ctx, wg: &n.wg, now: time.Now,
		call: func(ctx context.Context, req []byte) error {
			_, err := n.callLeader(ctx, req)
			return err
		},
		applied:  func() uint64 { return n.fsm.AppliedIndex() },
		snapshot: func() error { return n.raft.Snapshot().Error() },
		log: func(msg string, index, applied uint64, err error) {
			if err == nil {
				n.log.Info(msg, "snapshot_index", index, "applied", applied)
			} else {
				n.log.Debug(msg, "snapshot_index", index, "applied", applied, "error", err)
			}
		},
	}
}

// refused is the follower's side, told by the FSM (on raft's FSM goroutine)
// that it refused a snapshot of index, older than applied. It does not wait.
func (a *snapshotAsker) refused(index, applied uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.h.now()
	if a.asking || a.h.ctx.Err() != nil || (!a.askedAt.IsZero() && now.Sub(a.askedAt) < snapshotAskEvery) {
		return
	}
	a.asking, a.askedAt = true, now
	a.h.log("refused a snapshot older than the applied state; asking the leader for a newer one", index, applied, nil)
	a.h.wg.Go(func() {
		if err := a.h.call(a.h.ctx, encodeSnapshotAsk(applied)); err != nil {
			a.h.log("the leader did not take the snapshot ask", index, applied, err)
		}
		a.mu.Lock()
		a.asking = false
		a.mu.Unlock()
	})
}

// asked is the leader's side: take a snapshot, in the background, if the
// local FSM has applied index and the rate limit allows.
func (a *snapshotAsker) asked(index uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.h.now()
	if a.snapping || a.h.ctx.Err() != nil || a.h.applied() < index ||
		(!a.snappedAt.IsZero() && now.Sub(a.snappedAt) < snapshotAskEvery) {
		return
	}
	a.snapping, a.snappedAt = true, now
	a.h.wg.Go(func() {
		if err := a.h.snapshot(); err != nil {
			a.h.log("no snapshot for a follower's ask", index, a.h.applied(), err)
		}
		a.mu.Lock()
		a.snapping = false
		a.mu.Unlock()
	})
}

func encodeSnapshotAsk(applied uint64) []byte { return encodeIndexRequest(kindSnapshotAsk, applied) }

func decodeSnapshotAsk(b []byte) (uint64, error) { return decodeIndexRequest(b, kindSnapshotAsk) }

func encodeSnapshotAskReply() []byte { return []byte{wireVersion, kindSnapshotAsk} }
