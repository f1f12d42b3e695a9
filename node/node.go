package node

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/cluster"
	"github.com/raftlock/raftlock/internal/gossip"
	"github.com/raftlock/raftlock/internal/storage"
	"github.com/raftlock/raftlock/transport"
)

// Node is one replica: a Raft member with the lock state machine, its
// transport, the leader's session expiry, forwarding of proposals to the
// leader and the local event fan-out. Create it with Start and stop it with
// Close. All methods are safe for concurrent use.
type Node struct {
	cfg     Config
	log     *slog.Logger
	fsm     *fsm.FSM
	raft    *raft.Raft
	trans   *transport.Transport
	store   *storage.Stores
	metrics *metrics

	applied appliedIndex
	// applyTimes: when this replica applied takeover markers and delay
	// starts (apply_times.go).
	applyTimes applyTimes
	events     *eventHub
	expiry     *expiryManager
	verifier   *verifier
	proposer   *batcher // leader: group commit into raft
	forwarder  *batcher // follower: group forwarding to the leader
	// keepalives: a follower's keepalives, in batches to the leader.
	keepalives *keepaliveForwarder
	members    *gossip.Layer // gossip layer; nil without Config.Gossip
	// memberHosts: the members' source addresses, for the transport's
	// member reserve (cluster.MemberHosts).
	memberHosts *cluster.MemberHosts

	id         *identity              // node id, incarnation, Raft id, cluster id
	guard      *cluster.VoteGuard     // the vote policy; the transport enforces it (RaftVoteGate)
	formation  *formation             // founding a cluster; nil if this node does not found one
	joins      joinTable              // static mode, on the leader: nodes asking to be added
	joinErr    atomic.Pointer[string] // static mode: why no peer took this node's join request (Status.JoinErr)
	refusals   refusals               // why this node was refused, or refused others
	reconciler *reconciler            // the leader's membership loop

	ctx     context.Context // ends when Close begins
	cancel  context.CancelFunc
	wg      sync.WaitGroup // every goroutine the node starts (but the proposer's batches)
	started atomic.Bool    // raft is set
	crash   atomic.Bool    // kill: no leadership transfer
	// commits counts the proposer's batches. Shutdown waits for them before
	// it stops raft: raft answers an Apply future only while it runs (one
	// committed but not yet applied when raft stops is never answered, and
	// its batch would block Close for ever).
	commits sync.WaitGroup
	// announcer tells followers about hand-off grants at once (leader).
	announcer *announcer
	// nudges ask the leader to propagate its commit index (nudge.go).
	nudges *nudger
	// snapAsks: a follower that refused an older snapshot asks the leader
	// for a newer one (snapshot_ask.go).
	snapAsks *snapshotAsker
	// leadingHook, when set (tests), runs on the leadership watcher the
	// moment this node learns it leads, before the takeover barrier.
	leadingHook atomic.Pointer[func()]
	ready       chan struct{}
	closing     sync.Once
	closed      chan struct{}
	errc        error
}

// ID returns the node's id.
func (n *Node) ID() string { return n.cfg.ID }

// Addr returns the node's Raft/RPC address as peers dial it.
func (n *Node) Addr() string { return n.trans.Addr() }

// Timing returns the node's Raft timeouts (lockapi sizes session TTLs from them).
func (n *Node) Timing() Timing { return n.cfg.Timing }

// logger returns the node's logger.
func (n *Node) logger() *slog.Logger { return n.log }

// Ready returns a channel closed once the node knows a leader and its FSM
// has caught up with the leader's commit index at that time.
func (n *Node) Ready() <-chan struct{} { return n.ready }

// WaitReady waits until Ready is closed, ctx ends, or the node closes.
// When ctx ends first, the error wraps ErrNoQuorum and ctx.Err() and says
// why the node is not ready: in no cluster yet (with gossip and every seed
// gone: "no seed reachable" and the seeds tried), no leader known, or
// catching up with the log.
func (n *Node) WaitReady(ctx context.Context) error {
	if err := checkCtx(ctx); err != nil {
		return err
	}
	if err := n.haltErr(); err != nil {
		return err
	}
	select {
	case <-n.ready:
		return nil
	case <-n.closed:
		return ErrClosed
	case <-ctx.Done():
		return fmt.Errorf("node: not ready (%s): %w: %w", notReadyReason(n.Status()), ErrNoQuorum, ctx.Err())
	}
}

func (n *Node) becomeReady() {
	defer n.wg.Done()
	if err := n.Sync(n.ctx); err != nil {
		return // closing
	}
	close(n.ready)
	n.log.Info("node ready", "applied_index", n.applied.get())
}

func (n *Node) isClosed() bool {
	select {
	case <-n.closed:
		return true
	default:
		return false
	}
}
