package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/hashicorp/raft"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/fsmwire"
)

// Admin operations forwarded to the leader:
//
//	request: v, kindAdmin, op, body
//	  adminRestore   body = the backup (raw bytes)
//	  adminTransfer  body = JSON transferMsg
//	  adminRemove    body = JSON removeMsg
//	  adminLeases    body = JSON leasesMsg (admin_reads.go)
//	  adminRestoreStep body = an encoded fsm.Entry of one restore command
//	                 (restoreReplicated; cluster version 4)
//	reply:   v, kindAdmin, JSON adminReply
//
// Bodies are bounded by the transport's message limit (16 MiB by default);
// JSON bodies by maxMembershipMsg and decoded strictly. A replica of the
// previous release answers "unknown request kind" (an error).
const kindAdmin byte = 33

const (
	adminRestore  byte = 1
	adminTransfer byte = 2
	adminRemove   byte = 3
	adminLeases   byte = 4
)

// adminReply is the leader's answer. ErrKind carries the sentinel.
type adminReply struct {
	ErrKind   string              `json:"err_kind,omitempty"`
	Err       string              `json:"err,omitempty"`
	Restored  *fsm.RestoreSummary `json:"restored,omitempty"`
	NewLeader string              `json:"new_leader,omitempty"`
	Left      map[string]int64    `json:"left_ms,omitempty"` // adminLeases: session id → ms
	Step      *restoreStepReply   `json:"step,omitempty"`    // adminRestoreStep
}

var adminKinds = []struct {
	kind string
	err  error
}{
	{"not_leader", errNotLeader}, {"no_quorum", ErrNoQuorum}, {"invalid", ErrInvalidArgument},
	{"refused", ErrRefused}, {"snapshot", fsmwire.ErrInvalidSnapshot}, {"closed", ErrClosed},
	{"restore_replicated", errRestoreReplicated},
}

func adminReplyOf(err error) adminReply {
	if err == nil {
		return adminReply{}
	}
	r := adminReply{ErrKind: "internal", Err: err.Error()}
	for _, k := range adminKinds {
		if errors.Is(err, k.err) {
			r.ErrKind = k.kind
			break
		}
	}
	return r
}

// err rebuilds the leader's error: the sentinel for errors.Is, the
// leader's message for people.
func (r adminReply) err() error {
	if r.ErrKind == "" {
		return nil
	}
	for _, k := range adminKinds {
		if r.ErrKind == k.kind {
			return fmt.Errorf("%w (leader: %s)", k.err, r.Err)
		}
	}
	return fmt.Errorf("node: leader: %s", r.Err)
}

// handleAdmin serves kindAdmin on the leader (req starts after the kind
// byte).
func (n *Node) handleAdmin(ctx context.Context, req []byte) ([]byte, error) {
	if len(req) < 1 {
		return nil, fmt.Errorf("%w: admin request without op", errWire)
	}
	var reply adminReply
	switch op, body := req[0], req[1:]; {
	case !n.started.Load() || n.raft.State() != raft.Leader:
		reply = adminReplyOf(errNotLeader)
	case op == adminRestore:
		var sum fsm.RestoreSummary
		out := n.proposeRestore(ctx, restoreCmd{data: body, sum: &sum})
		if reply = adminReplyOf(wireSafe(out.err)); out.err == nil {
			reply.Restored = &sum
		}
	case op == adminRestoreStep:
		r, err := n.handleRestoreStep(ctx, body)
		if err != nil {
			return nil, err
		}
		reply = r
	case op == adminTransfer:
		var m transferMsg
		if err := decodeJSON(body, &m); err != nil {
			return nil, err
		}
		to, err := n.transferLocal(ctx, m.To)
		reply = adminReplyOf(wireSafe(err))
		reply.NewLeader = to
	case op == adminRemove:
		var m removeMsg
		if err := decodeJSON(body, &m); err != nil {
			return nil, err
		}
		reply = adminReplyOf(n.requestRemoval(m.NodeID))
	case op == adminLeases:
		r, err := n.leasesReply(body)
		if err != nil {
			return nil, err
		}
		reply = r
	default:
		return nil, fmt.Errorf("%w: unknown admin op %d", errWire, op)
	}
	b, err := json.Marshal(reply)
	if err != nil {
		return nil, err
	}
	return append([]byte{wireVersion, kindAdmin}, b...), nil
}

// callAdmin sends an admin request to the leader and decodes its reply.
func (n *Node) callAdmin(ctx context.Context, op byte, body []byte) (adminReply, error) {
	req := append([]byte{wireVersion, kindAdmin, op}, body...)
	addr, id := n.raft.LeaderWithID()
	switch {
	case addr == "":
		return adminReply{}, errNoLeader
	case string(id) == n.id.raftID:
		return adminReply{}, errNotLeader // we became leader: retry locally
	}
	// Bounded by ctx alone: a restore or a transfer may take longer than
	// one forwarded command.
	b, err := n.trans.Call(ctx, string(addr), req)
	if err != nil {
		return adminReply{}, fmt.Errorf("%w: %s: %w", errForward, id, err)
	}
	if len(b) < 2 || b[0] != wireVersion || b[1] != kindAdmin {
		return adminReply{}, fmt.Errorf("%w: %w: bad admin reply header", errForward, errWire)
	}
	var r adminReply
	if err := decodeJSON(b[2:], &r); err != nil {
		return adminReply{}, fmt.Errorf("%w: %w", errForward, err)
	}
	return r, r.err()
}
