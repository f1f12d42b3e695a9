package node

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/hashicorp/raft"
	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/cluster"
	"github.com/raftlock/raftlock/internal/hclogslog"
	"github.com/raftlock/raftlock/internal/storage"
	"github.com/raftlock/raftlock/transport"
)

// Starting a node: storage, identity, transport, Raft, formation, gossip.

// Start opens the node's storage, starts its transport and Raft, and returns.
// It does not wait for a leader: use Ready or WaitReady. With Bootstrap and
// Peers, a node without Raft state bootstraps a new cluster (every node of
// it may be given the same Peers). With gossip (Config.Gossip), Start also starts the
// gossip layer and makes a first attempt to join through Gossip.Join
// (waited for at most 5 Gossip.Timing.ProbeIntervals and ctx; retried in the
// background); it fails with ErrDuplicateID if that attempt finds another
// live member with this node's ID while this node has no Raft state. ctx
// only bounds Start itself.
func Start(ctx context.Context, cfg Config) (*Node, error) {
	if err := checkCtx(ctx); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults() // the one place defaults are applied
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	n := &Node{cfg: cfg, log: logger.With("node", cfg.ID), ready: make(chan struct{}), closed: make(chan struct{})}
	n.ctx, n.cancel = context.WithCancel(context.Background())
	n.metrics = newMetrics(n)
	n.announcer = newAnnouncer(n.announcerHost()) // n.trans is set later; send reads it when called
	n.nudges = &nudger{h: n.nudgerHost()}
	n.snapAsks = &snapshotAsker{h: n.snapshotAskHost()}
	n.events = newEventHub(n.metrics.eventDrops.Inc)
	n.fsm = fsm.New((*observer)(n))
	n.reconciler = newReconciler(n)
	// The leader keeps one Apply in flight and gathers everything else into
	// the next one (group commit, see doc.go). A follower pipelines a few forwards, so that
	// a request joins the leader's next batch instead of waiting for the
	// previous forward's round trip. Both linger briefly for callers that
	// come straight back (see batcher).
	n.proposer = &batcher{max: cfg.MaxBatch, inflight: proposalsInFlight, run: n.commit, wg: &n.commits, lingerFrac: proposerLinger, deferrable: n.wouldQueue}
	n.forwarder = &batcher{max: cfg.MaxBatch, inflight: forwardsInFlight, run: n.forward, wg: &n.wg, lingerFrac: forwarderLinger}
	n.keepalives = &keepaliveForwarder{h: n.keepaliveForwarderHost()}
	n.verifier = &verifier{verify: n.confirmLeadership, wg: &n.wg}
	n.expiry = newExpiryManager(n.expiryHost())

	ok := false
	defer func() {
		if !ok {
			n.cancel()
			n.abortStart()
		}
	}()
	hlog := hclogslog.New(n.log, "raft")
	var err error
	if n.store, err = openStorage(&cfg, hlog); err != nil {
		return nil, err
	}
	n.store.WithAnchors(n.applied.get, func() bool { return n.started.Load() && n.raft.State() == raft.Leader })
	hasState, err := raft.HasExistingState(n.store.Logs, n.store.Stable, n.store.Snaps)
	if err != nil {
		return nil, fmt.Errorf("node: read raft state: %w", err)
	}
	if err := n.checkLeft(); err != nil {
		return nil, err
	}
	if n.id, err = loadIdentity(n.store.Stable, cfg.ID, hasState); err != nil {
		return nil, err
	}
	n.guard = &cluster.VoteGuard{Self: raft.ServerID(n.id.raftID), Config: n.latestConfig, Refused: n.metrics.votesRefused.Inc}
	peers, _ := n.memberAddrs()                   // the static peers
	n.memberHosts = cluster.NewMemberHosts(peers) // names are resolved once it runs
	tc := cfg.transportConfig()
	tc.Logger, tc.Registerer = n.log, cfg.Registerer
	tc.Identity, tc.CheckPeer, tc.AcceptLegacy = n.helloIdentity, n.checkPeer, n.acceptLegacy
	tc.RaftVoteGate, tc.MemberHost = n.guard.Allow, n.memberHosts.Has
	n.trans, err = transport.New(tc, transport.HandlerFunc(n.handleRPC))
	if err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	if cfg.Bootstrap && len(cfg.Peers) == 0 {
		// Development mode: a one-node cluster at the advertised address.
		n.cfg.Peers = []Peer{{ID: cfg.ID, Addr: n.trans.Addr()}}
	}
	rc := n.raftConfig(hlog)
	if cfg.Recover {
		if err := n.recover(rc, hasState); err != nil {
			return nil, err
		}
	}
	if !hasState && (cfg.Bootstrap || cfg.BootstrapExpect > 0) {
		if n.formation, err = newFormation(n); err != nil {
			return nil, err
		}
	}
	if n.raft, err = raft.NewRaft(rc, storage.Paced(tracedFSM{n.fsm, n.leaseTrace}, n.closed), n.store.Logs, n.store.Stable, n.store.Snaps, n.trans.RaftTransport()); err != nil {
		return nil, fmt.Errorf("node: start raft: %w", err)
	}
	n.started.Store(true) // publishes raft and formation to the RPC handlers
	if cfg.gossipOn() {
		if err := n.startMembership(ctx); err != nil {
			return nil, err
		}
	}
	n.startFormation(hasState)
	if err := n.metrics.register(cfg.Registerer); err != nil {
		return nil, err
	}
	n.wg.Add(4)
	go func() {
		defer n.wg.Done()
		n.memberHosts.Run(n.ctx, n.memberAddrs, n.resolvesNames())
	}()
	go n.watchLeadership()
	go n.becomeReady()
	go n.observeLeaders() // metrics_init.go
	ok = true
	n.log.Info("node started", "addr", n.trans.Addr(), "in_memory", cfg.InMemory, "data_dir", cfg.DataDir)
	return n, nil
}

func (n *Node) raftConfig(hlog *hclogslog.Logger) *raft.Config {
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(n.id.raftID)
	rc.HeartbeatTimeout = n.cfg.Timing.HeartbeatTimeout
	rc.ElectionTimeout = n.cfg.Timing.ElectionTimeout
	rc.LeaderLeaseTimeout = n.cfg.Timing.LeaderLeaseTimeout
	rc.CommitTimeout = n.cfg.Timing.CommitTimeout
	rc.SnapshotThreshold = n.cfg.SnapshotThreshold
	rc.SnapshotInterval = n.cfg.SnapshotInterval
	rc.TrailingLogs = n.cfg.TrailingLogs
	// BatchApplyCh stays off: our proposer already batches (one Apply in
	// flight), and futures left in a buffered applyCh at shutdown are never
	// answered.
	rc.NoLegacyTelemetry = true
	rc.Logger = hlog
	return rc
}

// abortStart releases what a failed Start opened.
func (n *Node) abortStart() {
	if n.members != nil {
		n.members.Stop()
	}
	if n.raft != nil {
		n.raft.Shutdown().Error()
	}
	if n.trans != nil {
		n.trans.Close()
		n.waitRaftConns()
	}
	n.proposer.close()
	n.forwarder.close()
	n.commits.Wait()
	n.wg.Wait()
	if n.store != nil {
		n.store.Close()
	}
	n.metrics.unregister(n.cfg.Registerer)
}
