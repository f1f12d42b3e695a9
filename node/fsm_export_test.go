package node

import (
	"context"
	"time"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/fsmwire"
)

// Helpers for the external tests of the state machine's node side.

// HandleRPC calls n's RPC handler with req, as if a peer's request had just
// arrived (a delayed delivery on a stalled connection, say).
func HandleRPC(ctx context.Context, n *Node, req []byte) ([]byte, error) {
	return n.handleRPC(ctx, "test-peer", req)
}

// EncodeApplyRequest is the apply request a follower forwards for cmds.
func EncodeApplyRequest(cmds []fsm.Command) ([]byte, error) { return encodeApplyRequest(cmds) }

// DecodeApplyReply returns the results (or errors) of an apply reply.
func DecodeApplyReply(b []byte, n int) ([]fsm.Result, []error, error) {
	outs, err := decodeApplyReply(b, n)
	if err != nil {
		return nil, nil, err
	}
	res, errs := make([]fsm.Result, n), make([]error, n)
	for i, o := range outs {
		res[i], errs[i] = o.result(), o.err
	}
	return res, errs, nil
}

// PeerInfo is the exported view of peerInfo for tests.
type PeerInfo = peerInfo

// AskPeerInfo calls the peer-info RPC of the server at addr through n.
func AskPeerInfo(ctx context.Context, n *Node, addr string) (PeerInfo, error) {
	return n.peerInfo(ctx, addr)
}

// ProposeAsLeader proposes a leader-only command through n (its leader).
func ProposeAsLeader(ctx context.Context, n *Node, cmd fsm.Command) (fsm.Result, error) {
	out := n.proposeAsLeader(ctx, cmd)
	return out.result(), out.err
}

// QuotaRefusals returns the node's quota_refusals_total{quota}.
func QuotaRefusals(n *Node, q fsmwire.Quota) float64 {
	return counterValue(n.metrics.quotaRefusals.WithLabelValues(q.String()))
}

// DelayEnds returns the node's lock_delay_ends_total{result}.
func DelayEnds(n *Node, result string) float64 {
	return counterValue(n.metrics.delayEnds.WithLabelValues(result))
}

// AfterDispatch sets a function n's apply goroutine calls once it has
// delivered an entry's events to subscribers, before it counts the entry as
// applied (nil: none). A function that blocks stalls the apply goroutine in
// that window.
func AfterDispatch(n *Node, f func(events []fsm.Event)) {
	if f == nil {
		n.events.afterDispatch.Store(nil)
		return
	}
	n.events.afterDispatch.Store(&f)
}

// ApplyRaw appends data to the log through n's raft (n must lead), as a
// leader of another release could.
func ApplyRaw(n *Node, data []byte) error { return n.raft.Apply(data, 5*time.Second).Error() }

// SnapshotNow asks n's raft for a snapshot.
func SnapshotNow(n *Node) error { return n.raft.Snapshot().Error() }

// IsLeading reports whether n leads and finished its takeover (its lease
// manager has every session's deadline).
func IsLeading(n *Node) bool { return n.expiry.isLeading() }

// StallTakeover sets a function n's expiry manager calls when it takes
// over, between its read of the sessions (and of its clock) and its replay
// of what was applied meanwhile (nil: none). A function that blocks stalls
// the takeover there, as a starved goroutine or a million sessions would.
func StallTakeover(n *Node, f func()) {
	if f == nil {
		n.expiry.takeoverRead.Store(nil)
		return
	}
	n.expiry.takeoverRead.Store(&f)
}

// RaftLastContact is when n's raft last heard from a leader.
func RaftLastContact(n *Node) time.Time { return n.raft.LastContact() }

// TransferOnce asks n's raft (n must lead) once to hand leadership to the
// node to, and waits until another node leads or the transfer failed.
func TransferOnce(ctx context.Context, n *Node, to string) (string, error) {
	return n.transferLocal(ctx, to)
}

// LeadershipRounds is how many leadership rounds n's verifier started.
func LeadershipRounds(n *Node) uint64 { return n.verifier.rounds.Load() }

// OnLeading makes f run on n's leadership watcher each time n learns that
// it leads, before its takeover barrier (nil: no hook).
func OnLeading(n *Node, f func()) {
	if f == nil {
		n.leadingHook.Store(nil)
		return
	}
	n.leadingHook.Store(&f)
}

// LegacyRestoreRequest is the forwarded restore of a node below cluster
// version 4 (the whole backup in one request), and AdminReplyErr the
// error of the leader's admin reply.
func LegacyRestoreRequest(backup []byte) []byte {
	return append([]byte{wireVersion, kindAdmin, adminRestore}, backup...)
}

// AdminReplyErr returns the error an admin reply carries.
func AdminReplyErr(b []byte) error {
	if len(b) < 2 || b[0] != wireVersion || b[1] != kindAdmin {
		return errWire
	}
	var r adminReply
	if err := decodeJSON(b[2:], &r); err != nil {
		return err
	}
	return r.err()
}

// ErrRestoreReplicated is errRestoreReplicated.
var ErrRestoreReplicated = errRestoreReplicated

// ConfirmLeadership runs one leadership round on n (its leader), unbatched.
func ConfirmLeadership(n *Node) error { return n.confirmLeadership() }
