package gossip

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/raft"

	"github.com/raftlock/raftlock/internal/gossipnet"
)

// Starting the gossip layer (memberlist with this node's delegates and
// transport) and stopping it.

// Timing tunes failure detection (node's GossipTiming converts to it).
type Timing struct {
	ProbeInterval     time.Duration
	ProbeTimeout      time.Duration
	GossipInterval    time.Duration
	PushPullInterval  time.Duration
	SuspicionMult     int
	TCPTimeout        time.Duration
	RetryJoinInterval time.Duration
}

// Config is what the gossip layer is started with: node's Config.Gossip
// (validated) and what the node is.
type Config struct {
	ID              string // node id: the memberlist name
	RaftAddr        string // Raft/RPC address, published
	BootstrapExpect int
	Wire            int // the node-to-node protocol version, published and required of members
	Incarnation     string
	RaftID          string

	Addr          string // bind address, "ip:port"
	AdvertiseAddr string
	Join          []string // seeds
	Key           []byte
	Timing        Timing
	// Listener and Dialer replace UDP/TCP (tests).
	Listener net.Listener
	Dialer   func(ctx context.Context, addr string) (net.Conn, error)

	// ReapTimeout: a member that failed or left is forgotten this long
	// (plus PushPullInterval) after, unless it is in the Raft configuration.
	ReapTimeout time.Duration
	// LeaveTimeout bounds the graceful leave broadcast (Leave).
	LeaveTimeout time.Duration
	// Stable keeps the known peers (KeyKnownPeers) across restarts.
	Stable raft.StableStore
	Logger *slog.Logger
}

// Host is what the gossip layer needs from its node; every function is
// safe for concurrent use and calls nothing of the layer.
type Host struct {
	HasRaftState func() bool                       // the node is part of a cluster
	ClusterID    func() string                     // "" before it has one
	LatestConfig func() (raft.Configuration, bool) // the Raft configuration, once Raft runs
	Refused      func(reason, detail, by string)   // a refusal this node learnt of (gossip or a member's Notify)
	Changed      func()                            // the member table changed
	Joined       func(ok bool)                     // a join round ended
	Conflict     func(reason string)               // a member was refused (first time per member and reason)
}

// MetaSizeError: the metadata this node would publish does not fit in
// memberlist's limit.
type MetaSizeError struct{ Size, Max int }

func (e *MetaSizeError) Error() string {
	return fmt.Sprintf("gossip metadata of %d bytes exceeds %d (shorten ID or address)", e.Size, e.Max)
}

// Start creates the gossip layer, makes the first join attempt (waited for
// at most 5 probe intervals, capped by TCPTimeout, and ctx; it goes on in
// the background if it takes longer) and starts its loops. It fails with a
// *MetaSizeError if the metadata is too large, and with ErrDuplicateID if
// the first attempt finds this node's id in use while the node has no Raft
// state.
func Start(ctx context.Context, cfg Config, h Host) (*Layer, error) {
	m := &Layer{
		cfg: cfg, h: h, log: cfg.Logger.With("component", "membership"), timing: cfg.Timing,
		poke: make(chan struct{}, 1), pubPoke: make(chan struct{}, 1), firstJoin: make(chan struct{}),
		members: make(map[string]*memberInfo), reported: make(map[string]bool), known: knownPeers{stable: cfg.Stable},
	}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	m.meta = Meta{V: metaVersion, Wire: cfg.Wire, ID: cfg.ID, Addr: cfg.RaftAddr, Expect: cfg.BootstrapExpect, State: h.HasRaftState(),
		Inc: cfg.Incarnation, RaftID: cfg.RaftID, Cluster: h.ClusterID()}
	worst := m.meta
	worst.Leaving, worst.State, worst.Cluster = true, true, strings.Repeat("f", 16)
	if b, _ := json.Marshal(worst); len(b) > memberlist.MetaMaxSize {
		m.cancel()
		return nil, &MetaSizeError{Size: len(b), Max: memberlist.MetaMaxSize}
	}

	t := m.timing
	mc := memberlist.DefaultLANConfig()
	mc.Name = cfg.ID
	mc.ProbeInterval, mc.ProbeTimeout = t.ProbeInterval, t.ProbeTimeout
	mc.GossipInterval, mc.PushPullInterval = t.GossipInterval, t.PushPullInterval
	mc.SuspicionMult, mc.TCPTimeout = t.SuspicionMult, t.TCPTimeout
	mc.GossipToTheDeadTime = t.PushPullInterval
	mc.DeadNodeReclaimTime = t.PushPullInterval // a failed member may come back at a new address
	mc.Delegate, mc.Events, mc.Conflict, mc.Alive, mc.Ping = m, m, m, m, m
	mc.Logger = log.New(memberlistLog{m.log.With("logger", "memberlist")}, "", 0)
	if len(cfg.Key) > 0 {
		mc.SecretKey = slices.Clone(cfg.Key)
	}
	if cfg.AdvertiseAddr != "" {
		host, port, _ := net.SplitHostPort(cfg.AdvertiseAddr)
		mc.AdvertiseAddr = host
		mc.AdvertisePort, _ = strconv.Atoi(port)
	}
	if cfg.Listener != nil {
		mc.Transport = gossipnet.NewStream(cfg.Listener, cfg.Dialer, t.ProbeTimeout, t.TCPTimeout)
	} else {
		host, port, _ := net.SplitHostPort(cfg.Addr)
		if host == "" {
			host = "0.0.0.0"
		}
		p, _ := strconv.Atoi(port)
		nt, err := gossipnet.NewNet(host, p, mc.Logger)
		if err != nil {
			m.cancel()
			return nil, fmt.Errorf("node: gossip: listen on %s: %w", cfg.Addr, err)
		}
		mc.Transport, mc.BindAddr, mc.BindPort = nt, host, nt.GetAutoBindPort()
	}
	ml, err := memberlist.Create(mc)
	if err != nil {
		m.cancel()
		mc.Transport.Shutdown()
		return nil, fmt.Errorf("node: gossip: %w", err)
	}
	m.ml = ml
	m.addr = ml.LocalNode().Address()
	for _, s := range cfg.Join {
		if s != m.addr {
			m.seeds = append(m.seeds, s)
		}
	}
	m.wg.Add(3)
	go m.joinLoop()
	go m.run()
	go m.publishLoop()
	if len(m.seeds) > 0 {
		wait := time.NewTimer(min(t.TCPTimeout, 5*t.ProbeInterval))
		defer wait.Stop()
		select {
		case <-m.firstJoin:
		case <-wait.C: // the attempt goes on in the background
		case <-ctx.Done():
			m.Stop()
			return nil, fmt.Errorf("node: joining the gossip cluster: %w", ctx.Err())
		}
	}
	if err := m.fatalErr(); err != nil {
		m.Stop()
		return nil, err
	}
	m.log.Info("gossip started", "gossip_addr", m.addr, "seeds", m.seeds, "bootstrap_expect", cfg.BootstrapExpect, "encrypted", len(cfg.Key) > 0)
	return m, nil
}

// shutdownGossip stops memberlist without a leave message. Idempotent.
func (m *Layer) shutdownGossip() {
	m.life.Lock()
	defer m.life.Unlock()
	m.mu.Lock()
	m.down = true
	m.mu.Unlock()
	if err := m.ml.Shutdown(); err != nil {
		m.log.Debug("gossip shutdown", "err", err)
	}
}

// Stop ends gossip at once (a crash, or after Leave) and waits for the loops.
func (m *Layer) Stop() {
	m.cancel()
	m.shutdownGossip()
	m.wg.Wait()
}

// Leave is the graceful gossip exit (Close and Leave): broadcast the
// memberlist leave so that members see this node go at once instead of
// suspecting it. Whether the node stays in the Raft configuration depends on
// what it announced before: nothing (a restart: the leader keeps it, and
// reaps it only if it stays away past the reap timeout) or Leaving (Leave:
// the leader has removed it already).
func (m *Layer) Leave() {
	m.cancel() // the loops stop; Stop waits for them
	m.life.Lock()
	defer m.life.Unlock()
	if m.isDown() {
		return
	}
	if err := m.ml.Leave(m.leaveTimeout()); err != nil {
		m.log.Info("gossip leave not confirmed", "err", err)
	}
	m.log.Info("left the gossip cluster")
}

func (m *Layer) leaveTimeout() time.Duration { return m.cfg.LeaveTimeout }

// AnnounceLeaving publishes that this node decommissions (node's Leave).
func (m *Layer) AnnounceLeaving() {
	m.mu.Lock()
	m.meta.Leaving = true
	m.mu.Unlock()
	if m.isDown() {
		return
	}
	if err := m.ml.UpdateNode(m.updateTimeout()); err != nil {
		m.log.Debug("leave intent not yet confirmed", "err", err)
	}
}

// CheckIPPort checks an "ip:port" address (memberlist needs IP literals):
// field names it in the error; emptyHost allows "" as host (every
// interface), zeroPort port 0 (a free port).
func CheckIPPort(field, addr string, emptyHost, zeroPort bool) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%s %q: %v", field, addr, err)
	}
	if host == "" && !emptyHost || host != "" && net.ParseIP(host) == nil {
		return fmt.Errorf("%s %q: host must be an IP address", field, addr)
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil || p == 0 && !zeroPort {
		return fmt.Errorf("%s %q: bad port", field, addr)
	}
	return nil
}
