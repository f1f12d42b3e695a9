package node

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/hclogslog"
	"github.com/raftlock/raftlock/transport"
)

// Node is one replica: a Raft member with the lock state machine, its
// transport, the leader's lease manager, forwarding of proposals to the
// leader and the local event fan-out. Create it with Start and stop it with
// Close. All methods are safe for concurrent use.
type Node struct {
	cfg     Config
	log     *slog.Logger
	fsm     *fsm.FSM
	raft    *raft.Raft
	trans   *transport.Transport
	store   *storage
	metrics *metrics

	applied   appliedIndex
	events    *eventHub
	lease     *leaseManager
	verifier  *verifier
	proposer  *batcher // leader: group commit into raft
	forwarder *batcher // follower: group forwarding to the leader
	members   *gossip  // gossip layer; nil without Config.GossipAddr

	id         *identity   // node id, incarnation, Raft id, cluster id
	guard      *voteGuard  // between the Raft transport and Raft
	formation  *formation  // founding a cluster; nil if this node does not found one
	joins      joinTable   // static mode, on the leader: nodes asking to be added
	refusals   refusals    // why this node was refused, or refused others
	reconciler *reconciler // the leader's membership loop

	ctx     context.Context // ends when Close begins
	cancel  context.CancelFunc
	wg      sync.WaitGroup // every goroutine the node starts (but the proposer's batches)
	started atomic.Bool    // raft is set
	crash   atomic.Bool    // Kill: no leadership transfer
	// commits counts the proposer's batches. Shutdown waits for them before
	// it stops raft: raft answers an Apply future only while it runs (one
	// committed but not yet applied when raft stops is never answered, and
	// its batch would block Close for ever).
	commits sync.WaitGroup
	// announcer tells followers about hand-off grants at once (leader).
	announcer *announcer
	ready     chan struct{}
	closing   sync.Once
	closed    chan struct{}
	errc      error
}

// Start opens the node's storage, starts its transport and Raft, and returns.
// It does not wait for a leader: use Ready or WaitReady. With Bootstrap and
// Peers, a node without Raft state bootstraps a new cluster (every node of
// it may be given the same Peers). With GossipAddr, Start also starts the
// gossip layer and makes a first attempt to join through Config.Join
// (waited for at most 5 GossipTiming.ProbeIntervals and ctx; retried in the
// background); it fails with ErrDuplicateID if that attempt finds another
// live member with this node's ID while this node has no Raft state. ctx
// only bounds Start itself.
func Start(ctx context.Context, cfg Config) (*Node, error) {
	if err := checkCtx(ctx); err != nil {
		return nil, err
	}
	if err := cfg.Validate(); err != nil {
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
	n.announcer = newAnnouncer(n)
	n.events = newEventHub(n.metrics.eventDrops.Inc)
	n.fsm = fsm.New((*observer)(n))
	n.lease = newLeaseManager(n)
	n.reconciler = newReconciler(n)
	// The leader keeps one Apply in flight and gathers everything else into
	// the next one (DESIGN §4a). A follower pipelines a few forwards, so that
	// a request joins the leader's next batch instead of waiting for the
	// previous forward's round trip. Both linger briefly for callers that
	// come straight back (see batcher).
	n.proposer = &batcher{max: cfg.MaxBatch, inflight: proposalsInFlight, run: n.commit, wg: &n.commits, lingerFrac: proposerLinger}
	n.forwarder = &batcher{max: cfg.MaxBatch, inflight: forwardsInFlight, run: n.forward, wg: &n.wg, lingerFrac: forwarderLinger}
	n.verifier = &verifier{verify: func() error { return n.raft.VerifyLeader().Error() }, wg: &n.wg}

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
	n.store.withFaults(cfg.DiskFault)
	hasState, err := raft.HasExistingState(n.store.logs, n.store.stable, n.store.snaps)
	if err != nil {
		return nil, fmt.Errorf("node: read raft state: %w", err)
	}
	if n.id, err = loadIdentity(n.store.stable, cfg.ID, hasState); err != nil {
		return nil, err
	}
	n.trans, err = transport.New(transport.Config{
		BindAddr:       cfg.BindAddr,
		AdvertiseAddr:  cfg.AdvertiseAddr,
		TLS:            cfg.TLS,
		AllowPlaintext: cfg.AllowPlaintext,
		Listener:       cfg.Listener,
		Dialer:         cfg.Dialer,
		Logger:         n.log,
		Registerer:     cfg.Registerer,
		Identity:       n.helloIdentity,
		CheckPeer:      n.checkPeer,
		AcceptLegacy:   n.acceptLegacy,
	}, transport.HandlerFunc(n.handleRPC))
	if err != nil {
		return nil, fmt.Errorf("node: transport: %w", err)
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
	n.guard = newVoteGuard(n.trans.RaftTransport(), rc.LocalID, n.latestConfig, n.metrics.votesRefused.Inc)
	if n.raft, err = raft.NewRaft(rc, n.fsm, n.store.logs, n.store.stable, n.store.snaps, n.guard); err != nil {
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
	n.wg.Add(2)
	go n.watchLeadership()
	go n.becomeReady()
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
		n.members.stop()
	}
	if n.raft != nil {
		n.raft.Shutdown().Error()
	}
	if n.guard != nil {
		n.guard.halt()
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
		n.store.close()
	}
	n.metrics.unregister(n.cfg.Registerer)
}

// ID returns the node's id.
func (n *Node) ID() string { return n.cfg.ID }

// Addr returns the node's Raft/RPC address as peers dial it.
func (n *Node) Addr() string { return n.trans.Addr() }

// Timing returns the node's Raft timeouts (lockapi sizes session TTLs from them).
func (n *Node) Timing() Timing { return n.cfg.Timing }

// Logger returns the node's logger.
func (n *Node) Logger() *slog.Logger { return n.log }

// Ready returns a channel closed once the node knows a leader and its FSM
// has caught up with the leader's commit index at that time.
func (n *Node) Ready() <-chan struct{} { return n.ready }

// WaitReady waits until Ready is closed, ctx ends, or the node closes.
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
		return fmt.Errorf("node: not ready: %w: %w", ErrNoQuorum, ctx.Err())
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

// watchLeadership runs the lease manager for as long as this node leads.
func (n *Node) watchLeadership() {
	defer n.wg.Done()
	var stop func()
	defer func() {
		if stop != nil {
			stop()
		}
	}()
	for {
		select {
		case <-n.ctx.Done():
			return
		case leader := <-n.raft.LeaderCh():
			n.metrics.leaderChanges.Inc()
			if stop != nil {
				stop()
				stop = nil
			}
			if !leader {
				n.log.Info("lost leadership")
				continue
			}
			n.log.Info("gained leadership", "term", n.raft.CurrentTerm())
			ctx, cancel := context.WithCancel(n.ctx)
			done := make(chan struct{})
			go func() {
				defer close(done)
				reconciled := make(chan struct{})
				go func() {
					defer close(reconciled)
					n.reconciler.lead(ctx)
				}()
				defer func() { <-reconciled }()
				n.lease.lead(ctx)
			}()
			stop = func() { cancel(); <-done }
		}
	}
}

// Close stops the node for a restart: it stays a member of the cluster
// (like a Consul server with leave_on_terminate=false). A leader first hands
// leadership to another voter; with gossip, the node leaves gossip
// gracefully; then Raft stops, the transport closes every connection and
// the storage is closed. The leader keeps the node in the Raft
// configuration — so stopping every replica and starting them again, in any
// order, resumes the cluster with its state — and removes it only if it
// stays away longer than ReapTimeout (and never below a quorum). To remove
// a node for good, use Leave. Calls in progress fail with ErrClosed. Close
// returns when everything has stopped or ctx ends (the shutdown then
// continues in the background). Safe to call more than once.
func (n *Node) Close(ctx context.Context) error {
	if err := checkCtx(ctx); err != nil {
		return err
	}
	n.closing.Do(func() {
		done := make(chan struct{})
		go func() {
			defer close(done)
			n.errc = n.shutdown()
		}()
		select {
		case <-done:
		case <-ctx.Done():
			n.errc = fmt.Errorf("node: close: %w (shutdown continues)", ctx.Err())
		}
	})
	return n.errc
}

// Kill stops the node abruptly, as a crash would look to the rest of the
// cluster: no leadership hand-off, no gossip leave (members see it fail).
// Storage is closed cleanly, so the node can be restarted from its data dir.
// Meant for tests and fault injection.
func (n *Node) Kill(ctx context.Context) error {
	if err := checkCtx(ctx); err != nil {
		return err
	}
	n.crash.Store(true)
	return n.Close(ctx)
}

func (n *Node) shutdown() error {
	if !n.crash.Load() && n.raft.State() == raft.Leader && n.hasOtherVoters() {
		if err := n.raft.LeadershipTransfer().Error(); err != nil {
			n.log.Warn("leadership transfer before shutdown failed", "err", err)
		}
	}
	if n.members != nil {
		if !n.crash.Load() {
			n.members.leave()
		}
		n.members.stop()
	}
	n.cancel()
	close(n.closed)
	n.proposer.close()
	n.forwarder.close()
	n.commits.Wait() // raft still runs: each batch's future is answered (committed, or leadership lost)
	f := n.raft.Shutdown()
	n.trans.Close()
	err := f.Error()
	n.guard.halt()
	n.waitRaftConns()
	n.wg.Wait()
	if cerr := n.store.close(); cerr != nil && err == nil {
		err = cerr
	}
	n.metrics.unregister(n.cfg.Registerer)
	n.log.Info("node closed")
	if err != nil {
		return fmt.Errorf("node: close: %w", err)
	}
	return nil
}

// waitRaftConns waits (boundedly) for raft's inbound connection goroutines,
// which may still be writing to the stable store, before it is closed.
func (n *Node) waitRaftConns() {
	ctx, cancel := context.WithTimeout(context.Background(), raftConnsDrain)
	defer cancel()
	if err := n.trans.WaitRaftConns(ctx); err != nil {
		n.log.Warn("raft connection handlers still running at close", "waited", raftConnsDrain)
	}
}

// raftConnsDrain bounds the wait of waitRaftConns.
const raftConnsDrain = 5 * time.Second

// otherServers returns the Raft addresses of the other servers in the
// configuration (none if it cannot be read).
func (n *Node) otherServers() []string {
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return nil
	}
	var addrs []string
	for _, s := range f.Configuration().Servers {
		if string(s.ID) != n.id.raftID {
			addrs = append(addrs, string(s.Address))
		}
	}
	return addrs
}

func (n *Node) hasOtherVoters() bool {
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return false
	}
	for _, s := range f.Configuration().Servers {
		if s.Suffrage == raft.Voter && string(s.ID) != n.id.raftID {
			return true
		}
	}
	return false
}

func (n *Node) isClosed() bool {
	select {
	case <-n.closed:
		return true
	default:
		return false
	}
}

// observer receives what the FSM applies (on Raft's FSM goroutine).
type observer Node

func (o *observer) Applied(index uint64, events []fsm.Event) {
	n := (*Node)(o)
	for i := range events {
		if events[i].FromQueue {
			if n.started.Load() && n.raft.State() == raft.Leader {
				n.announcer.collect(events)
			}
			break
		}
	}
	n.events.dispatch(events)
	n.lease.observe(events)
	n.metrics.observeEvents(events)
	for i := range events {
		if events[i].Kind == fsm.EventClusterChanged {
			n.adoptClusterID()
			break
		}
	}
	n.applied.advance(index) // last: a caller woken by it finds its events delivered
}

// Halted is told by the FSM that it stopped applying (fsm.HaltObserver).
func (o *observer) Halted(index uint64, err error) { (*Node)(o).halted(index, err) }

func (o *observer) Restored(index uint64) {
	n := (*Node)(o)
	n.applied.advance(index) // first: a subscriber that resyncs judges the state by it
	n.events.resyncAll()
	n.lease.restored()
	n.adoptClusterID()
}
