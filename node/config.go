package node

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/membership"
	"github.com/raftlock/raftlock/internal/nodehooks"
	"github.com/raftlock/raftlock/internal/storage"
	"github.com/raftlock/raftlock/transport"
)

// Peer is a member of a static cluster configuration.
type Peer struct {
	ID   string // unique node id
	Addr string // its Raft/RPC address (host:port)
}

// Timing are the Raft timeouts. Elections take between one and two
// HeartbeatTimeouts after a leader stops being heard; a leader that cannot
// reach a quorum for LeaderLeaseTimeout steps down. The leader heartbeats
// each follower every HeartbeatTimeout/10 to HeartbeatTimeout/5. Validate
// requires ElectionTimeout ≥ HeartbeatTimeout ≥ LeaderLeaseTimeout and
// CommitTimeout ≤ HeartbeatTimeout.
type Timing struct {
	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration
	// CommitTimeout is how often (between CommitTimeout and twice that)
	// the leader sends each follower an AppendEntries when no new entries
	// flow, so that followers learn the last commit index. At most
	// HeartbeatTimeout. It need not be short: a follower that waits for an
	// entry to apply (WaitApplied, Sync) nudges the leader (a Noop carries
	// the commit index), and hand-off grants are announced at once; a short
	// one costs every follower an RPC per tick while the cluster is idle.
	CommitTimeout time.Duration
}

// LANTiming suits replicas on one LAN or data centre, and is the default:
// a crashed leader is replaced in about a second, and the smallest session
// TTL is 4.5 s (lockapi.MinTTLFor). The leader heartbeats each follower
// every 50 to 100 ms (etcd: every 100 ms, with a 1 s election timeout;
// hashicorp/raft's own default: a 1 s HeartbeatTimeout). Until this
// release the default was FastFailoverTiming.
func LANTiming() Timing {
	return Timing{
		HeartbeatTimeout:   500 * time.Millisecond,
		ElectionTimeout:    500 * time.Millisecond,
		LeaderLeaseTimeout: 400 * time.Millisecond,
		CommitTimeout:      500 * time.Millisecond, // was 5 ms: see Timing.CommitTimeout
	}
}

// FastFailoverTiming trades idle CPU for failover time: 300 ms timeouts,
// so followers of a crashed leader start an election after 300 to 600 ms
// of silence instead of 500 to 1000 ms, and sessions may have TTLs from
// 2.7 s; but the leader heartbeats each follower every 30 to 60 ms, 5/3 as
// often as with LANTiming, and those heartbeats are most of an idle
// cluster's CPU. It was the default until LANTiming's timeouts were raised
// to 500 ms; a program whose sessions have TTLs under 4.5 s sets it to keep
// them (every member should then use it).
func FastFailoverTiming() Timing {
	return Timing{
		HeartbeatTimeout:   300 * time.Millisecond,
		ElectionTimeout:    300 * time.Millisecond,
		LeaderLeaseTimeout: 250 * time.Millisecond,
		CommitTimeout:      300 * time.Millisecond,
	}
}

// Config configures a Node. Start from DefaultConfig and set at least ID and
// either DataDir or InMemory, and a way to form the cluster (Bootstrap with
// Peers, or membership through gossip).
type Config struct {
	// ID uniquely identifies the node in the cluster, for its whole life.
	ID string
	// DataDir holds the Raft log, stable store and snapshots. Required unless
	// InMemory.
	DataDir string
	// InMemory keeps the log and snapshots in memory: NOT durable. For tests
	// and throw-away demos only; a restarted in-memory node has lost its state
	// and must not rejoin its old cluster under the same ID. An in-memory
	// node needs Bootstrap, Peers or Gossip (it has no state to restart
	// from): Validate refuses one with none of them.
	InMemory bool

	// BindAddr is the TCP address of the node's one port (Raft and RPC).
	BindAddr string
	// AdvertiseAddr is the address peers dial; default: the bound address.
	AdvertiseAddr string
	// TLS, when set, makes every Raft and RPC connection mutual TLS.
	TLS *tls.Config

	// AllowPlaintext admits a BindAddr (or Listener) other than loopback
	// without TLS; without it such a node does not start. Without TLS
	// anyone who reaches the port can speak Raft to the node: set it only
	// where the network itself is trusted. See
	// transport.Config.AllowPlaintext.
	AllowPlaintext bool
	// Inbound bounds the connections others open to the node's port and
	// what they can make it hold: connections and handshakes in total and
	// per source address, a reserve of handshake slots for the cluster's
	// own members (the addresses of the Raft configuration, Peers and
	// gossip members) that strangers never get, a short first-byte
	// timeout, a budget of failed handshakes per address, and the RPC
	// frame bytes held per connection and in all. See
	// transport.InboundLimits for each field and its default; a zero field
	// means its default. Members are recognised by source IP: bind each
	// node to the IP it advertises (its dials then come from it).
	Inbound transport.InboundLimits

	// Static membership (without gossip). Peers lists the cluster's nodes.
	//
	// Bootstrap says "found a new cluster" (etcd's initial-cluster-state
	// "new"): a node without Raft state agrees with a majority of Peers on
	// the founding configuration (formation: single-decree Paxos, see
	// internal/membership) and bootstraps it; give every founding node the
	// same Peers and Bootstrap. If formation finds that the cluster exists
	// already (a peer has Raft state), the node joins it as a new member
	// instead: a node never founds twice, and one that lost its data dir
	// never comes back as its old self.
	//
	// Bootstrap without Peers (and without gossip) founds a one-node
	// cluster of this node at its advertised address: development mode.
	// Without Bootstrap (initial-cluster-state "existing"), a node without
	// Raft state only joins: it asks Peers to add it, and the leader adds it
	// as a non-voter and promotes it once it has caught up.
	//
	// A node with Raft state ignores both and restarts as the member it is.
	Bootstrap bool
	Peers     []Peer

	// Recover, on a node with Raft state, makes it the only voter of its
	// cluster before it starts: disaster recovery when a majority of voters
	// is lost for good (like Consul's peers.json or etcd's
	// --force-new-cluster). Every entry in this node's log is kept, as if
	// committed, with the lock table and the token counter; whatever only
	// the lost voters had is gone. The cluster then grows back as new
	// members join. It runs once per data dir: a later start with Recover
	// still set logs an error and starts normally. Never use it while other
	// voters of the cluster may still be running: two clusters would grant
	// the same locks.
	Recover bool

	// Gossip configures membership through gossip (hashicorp/memberlist):
	// on when Gossip.Addr is set. See GossipConfig.
	Gossip GossipConfig
	// BootstrapExpect > 0 forms a new cluster through gossip: nodes without
	// Raft state wait until that many nodes with the same BootstrapExpect are
	// visible, agree on the same members and then each bootstraps with the
	// identical configuration. A node that has Raft state, or that sees a
	// member that has, never bootstraps (it is added by the leader).
	// Exclusive with Bootstrap; at most MaxVoters.
	BootstrapExpect int
	// MaxVoters is the most voters the leader keeps (odd counts: 5 servers
	// give 5 voters, 4 give 3). Members join as non-voters (they apply the
	// log and serve their callers alike) and are promoted once they have
	// been healthy for Stabilization. 0 means 5.
	MaxVoters int
	// MaxNonvoters bounds the non-voters the leader adds (each costs the
	// leader a replication stream). Default 16.
	MaxNonvoters int
	// Stabilization is how long a non-voter must have been healthy —
	// reachable over Raft/RPC by the leader, caught up, in contact with the
	// leader — before it is promoted to voter (Consul autopilot's
	// ServerStabilizationTime). A member that cannot be reached over Raft
	// (a TLS mismatch, a one-way partition) is never promoted. Default 10s.
	Stabilization time.Duration
	// ReapTimeout is how long a failed member stays in the Raft
	// configuration before the leader removes it — never when that would
	// leave fewer voters than a quorum of the configuration, or fewer
	// healthy voters than a quorum of what remains. A member removed while
	// in fact alive (gossip cut, Raft fine) is added back once gossip sees
	// it again. A member that leaves gracefully is removed at once.
	// 0 means 30s.
	ReapTimeout time.Duration

	// Timing are the Raft timeouts; default LANTiming.
	Timing Timing
	// SnapshotThreshold: log entries between snapshots.
	SnapshotThreshold uint64
	// SnapshotInterval: how often Raft checks whether to snapshot.
	SnapshotInterval time.Duration
	// TrailingLogs: entries kept after a snapshot for slow followers.
	TrailingLogs uint64
	// MaxBatch: commands gathered into one log entry (group commit).
	MaxBatch int
	// AttemptTimeout bounds one attempt of a step the node retries: a
	// forwarded RPC to the leader, the enqueue of a Raft Apply, a membership
	// change, a probe or a join request. On timeout the step is tried again
	// while the caller's ctx allows (safely: client commands are
	// exactly-once by request number). Default 2s; at least
	// Timing.HeartbeatTimeout.
	AttemptTimeout time.Duration

	// Logger receives the node's logs, Raft's included. Nil: discarded.
	Logger *slog.Logger
	// Registerer receives the node's Prometheus metrics. Nil: none.
	Registerer prometheus.Registerer

	// Listener, when set, is the listener the node serves its port on
	// instead of binding BindAddr: one the application bound itself (a port
	// it had to know before writing Peers, a socket handed over by systemd
	// socket activation or a supervisor). BindAddr should then name its
	// address (the transport checks it for AllowPlaintext and advertises it
	// unless AdvertiseAddr is set). The node closes it when it stops.
	Listener net.Listener

	// Log store.
	//
	// LogStore chooses where Raft keeps its log and stable state under
	// DataDir: LogStoreBolt (the default; "" too) is raft-boltdb/v2 in
	// raft.db, two fsyncs per append; LogStoreWAL is hashicorp/raft-wal in
	// wal/ (segment files and a small bolt meta store), one fsync per
	// append; it is in a build only with the build tag raftwal (raft-wal
	// pulls in github.com/coreos/etcd, which the default build leaves
	// out): without it Validate refuses LogStoreWAL. Snapshots are files
	// under DataDir either way. A data dir
	// holds one kind: Start refuses one that holds the other's state
	// (ErrInvalidConfig); MigrateLogStore converts a stopped node's data
	// dir. Ignored with InMemory.
	//
	// raft-wal must be v0.4.2 or later: v0.4.0 left the tail segment
	// without its index block when Raft truncated the log's tail (a
	// follower dropping a conflicting suffix), and the next Start panicked
	// in raft.NewRaft (hashicorp/raft-wal#31;
	// TestWALRestartsAfterTailTruncation). The chaos harness's
	// crash-restart classes run both stores.
	LogStore LogStore

	// State machine quotas and versions.
	//
	// Limits are the replicated quotas (see fsm.Limits): the state machine
	// enforces them deterministically, so they are part of the replicated
	// state, and a leader proposes its Limits (fsm.SetLimits) when they
	// differ from the state's — once the cluster version is 2. Give every
	// node the same Limits. A command a quota refuses gets fsm.StatusQuota
	// (Result.Err wraps fsm.ErrQuota) and changes nothing; refusals are
	// counted in raftlock_node_quota_refusals_total{quota}. DefaultConfig
	// sets fsm.DefaultLimits(): lock names of up to 512 bytes, 10,000
	// waiters per lock, 10,000 locks and waits per session, 100,000
	// sessions, 1,024 requests in flight per session; and, once the
	// cluster version is 4, two million locks (grants, waiters and
	// lock-delays), 1 GiB of accounted state, 1,000 waiters of one session
	// in one lock's queue, and fair shares for 8 nodes (NodeShares): a
	// node is guaranteed 1/32 of the sessions, locks and bytes and of
	// each lock's queue (3,125 sessions, 62,500 locks, 32 MiB, 312
	// waiters), and may take more only while the cluster (or the queue)
	// is less than three quarters full — so no node's clients can starve
	// another's.
	// A session belongs to the node its OpenSession came through (the
	// leader records it; see fsm.OpenSession.Node). A zero field means no
	// quota (RequestWindow: the default; NodeShares: no shares, first come
	// first served).
	Limits fsm.Limits
	// hooks are the test hooks (internal/nodehooks), set only through
	// internal/nodeopts.Hooks; zero in production.
	hooks nodehooks.Hooks
}

// DefaultConfig returns a Config with LAN timings and sizes suited to a lock
// service; ID, DataDir (or InMemory) and the addresses remain to be set.
//
// The rule for every tunable: a zero value means its default — the value
// DefaultConfig gives it. Start applies the defaults once (withDefaults)
// and Validate judges the result, so a Config built from scratch and one
// from DefaultConfig behave alike. (Limits is taken as a whole: the zero
// Limits means fsm.DefaultLimits(); in a non-zero Limits a zero field means
// "no quota", see Limits.)
func DefaultConfig() Config {
	return Config{BindAddr: defaultBindAddr}.withDefaults()
}

const defaultBindAddr = "127.0.0.1:7400"

// withDefaults returns c with every zero tunable set to its default.
func (c Config) withDefaults() Config {
	set := func(v any, def any) {
		switch p := v.(type) {
		case *uint64:
			if *p == 0 {
				*p = def.(uint64)
			}
		case *int:
			if *p == 0 {
				*p = def.(int)
			}
		case *time.Duration:
			if *p == 0 {
				*p = def.(time.Duration)
			}
		}
	}
	if c.BindAddr == "" && c.Listener == nil {
		c.BindAddr = defaultBindAddr
	}
	if c.LogStore == "" {
		c.LogStore = LogStoreBolt
	}
	if c.Timing == (Timing{}) {
		c.Timing = LANTiming()
	}
	set(&c.SnapshotThreshold, uint64(16384))
	set(&c.SnapshotInterval, 30*time.Second)
	set(&c.TrailingLogs, uint64(10240))
	set(&c.MaxBatch, 4096)
	set(&c.AttemptTimeout, 2*time.Second)
	set(&c.MaxVoters, defaultMaxVoters)
	set(&c.MaxNonvoters, defaultMaxNonvoters)
	set(&c.Stabilization, defaultStabilization)
	set(&c.ReapTimeout, defaultReapTimeout)
	if c.Gossip.Timing == (GossipTiming{}) {
		c.Gossip.Timing = LANGossipTiming()
	}
	if c.Limits == (fsm.Limits{}) {
		c.Limits = fsm.DefaultLimits()
	}
	if c.Inbound == (transport.InboundLimits{}) {
		c.Inbound = transport.DefaultConfig().Inbound
	}
	return c
}

// transportConfig is the part of the transport's configuration that c
// sets (Start adds the node's hooks, logger and registerer).
func (c *Config) transportConfig() transport.Config {
	return transport.Config{
		BindAddr:       c.BindAddr,
		AdvertiseAddr:  c.AdvertiseAddr,
		TLS:            c.TLS,
		AllowPlaintext: c.AllowPlaintext,
		Listener:       c.Listener,
		Dialer:         c.hooks.Dialer,
		Inbound:        c.Inbound,
	}
}

// Validate reports the first problem with c (its zero tunables taken as
// their defaults), wrapping ErrInvalidConfig.
func (c *Config) Validate() error {
	d := c.withDefaults()
	return d.validate()
}

func (c *Config) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...)
	}
	t := c.Timing
	switch {
	case c.ID == "":
		return bad("ID is empty")
	case membership.ValidID(c.ID) != nil:
		return bad("%v", membership.ValidID(c.ID))
	case c.DataDir == "" && !c.InMemory:
		return bad("DataDir is empty and InMemory is false")
	case c.DataDir != "" && c.InMemory:
		return bad("both DataDir and InMemory set")
	case c.BindAddr == "" && c.Listener == nil:
		return bad("BindAddr is empty")
	case t.HeartbeatTimeout < 5*time.Millisecond:
		return bad("Timing.HeartbeatTimeout %v < 5ms", t.HeartbeatTimeout)
	case t.ElectionTimeout < 5*time.Millisecond:
		return bad("Timing.ElectionTimeout %v < 5ms", t.ElectionTimeout)
	case t.ElectionTimeout < t.HeartbeatTimeout: // hashicorp/raft refuses it at start
		return bad("Timing.ElectionTimeout %v < HeartbeatTimeout %v", t.ElectionTimeout, t.HeartbeatTimeout)
	case t.LeaderLeaseTimeout < 5*time.Millisecond || t.LeaderLeaseTimeout > t.HeartbeatTimeout:
		return bad("Timing.LeaderLeaseTimeout %v outside [5ms, HeartbeatTimeout %v]", t.LeaderLeaseTimeout, t.HeartbeatTimeout)
	case t.CommitTimeout < time.Millisecond || t.CommitTimeout > t.HeartbeatTimeout:
		return bad("Timing.CommitTimeout %v outside [1ms, HeartbeatTimeout %v]", t.CommitTimeout, t.HeartbeatTimeout)
	case c.SnapshotThreshold == 0:
		return bad("SnapshotThreshold is 0")
	case c.SnapshotInterval < 5*time.Millisecond:
		return bad("SnapshotInterval %v < 5ms", c.SnapshotInterval)
	case c.MaxBatch < 1:
		return bad("MaxBatch %d < 1", c.MaxBatch)
	case c.AttemptTimeout < t.HeartbeatTimeout:
		return bad("AttemptTimeout %v < HeartbeatTimeout %v", c.AttemptTimeout, t.HeartbeatTimeout)
	case c.Bootstrap && len(c.Peers) == 0 && c.gossipOn():
		return bad("Bootstrap without Peers founds a one-node static cluster: with gossip, use BootstrapExpect = 1")
	case c.LogStore != LogStoreBolt && c.LogStore != LogStoreWAL:
		return bad("LogStore %q is neither %q nor %q", c.LogStore, LogStoreBolt, LogStoreWAL)
	case c.LogStore == LogStoreWAL && !storage.WALBuilt && !c.InMemory:
		return bad("LogStore %q needs a build with -tags raftwal", c.LogStore)
	case c.Recover && c.InMemory:
		return bad("Recover needs a DataDir (an in-memory node has nothing to recover)")
	case c.MaxNonvoters < 0:
		return bad("MaxNonvoters %d < 0", c.MaxNonvoters)
	case c.Stabilization < 0:
		return bad("Stabilization %v < 0", c.Stabilization)
	case c.TLS != nil && c.gossipOn() && len(c.Gossip.Key) == 0 && !c.Gossip.AllowUnencrypted:
		return bad("TLS is on but gossip is not encrypted: set Gossip.Key (or Gossip.AllowUnencrypted on a closed network)")
	}
	if err := c.validateGossip(); err != nil {
		return bad("%s", err.Error())
	}
	if c.InMemory && !c.Bootstrap && len(c.Peers) == 0 && !c.gossipOn() {
		return bad("InMemory without Bootstrap, Peers or Gossip can neither found nor join a cluster (it would wait forever for a quorum): set Bootstrap for a one-node cluster, Peers, or Gossip")
	}
	if err := c.Limits.Validate(); err != nil {
		return bad("Limits: %v", err)
	}
	// The transport's own rules (a plaintext bind that other machines can
	// reach, the TLS config, the advertised address, the Inbound limits),
	// here so that Start refuses them before it opens the data dir.
	if err := c.transportConfig().Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	ids, addrs := map[string]bool{}, map[string]bool{}
	self := false
	for _, p := range c.Peers {
		switch {
		case p.ID == "" || p.Addr == "":
			return bad("peer %+v: empty ID or Addr", p)
		case membership.ValidID(p.ID) != nil:
			return bad("peer %v", membership.ValidID(p.ID))
		case ids[p.ID]:
			return bad("duplicate peer ID %q", p.ID)
		case addrs[p.Addr]:
			return bad("duplicate peer address %q", p.Addr)
		}
		if _, _, err := net.SplitHostPort(p.Addr); err != nil {
			return bad("peer %q address %q: %v", p.ID, p.Addr, err)
		}
		ids[p.ID], addrs[p.Addr] = true, true
		self = self || p.ID == c.ID
	}
	if c.Bootstrap && len(c.Peers) > 0 && !self {
		return bad("Peers does not contain this node's ID %q", c.ID)
	}
	return nil
}
