package node

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/raftlock/raftlock/internal/gossipnet"
)

// Starting the gossip layer (memberlist with this node's delegates and
// transport) and stopping it.

// startMembership creates the gossip layer, makes the first join attempt
// (waited for at most 5 probe intervals, capped by TCPTimeout, and ctx; it
// goes on in the background if it takes longer) and starts its loops. Raft
// is running.
func (n *Node) startMembership(ctx context.Context) error {
	cfg := &n.cfg
	m := &gossip{
		n: n, log: n.log.With("component", "membership"), timing: cfg.gossipTiming(),
		poke: make(chan struct{}, 1), leadPoke: make(chan struct{}, 1), pubPoke: make(chan struct{}, 1), firstJoin: make(chan struct{}),
		members: make(map[string]*memberInfo), reported: make(map[string]bool), known: knownPeers{stable: n.store.Stable},
	}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	id := n.ident()
	m.meta = memberMeta{V: metaVersion, Wire: int(wireVersion), ID: cfg.ID, Addr: n.trans.Addr(), Expect: cfg.BootstrapExpect, State: n.hasRaftState(),
		Inc: id.Incarnation, RaftID: id.RaftID, Cluster: id.ClusterID}
	worst := m.meta
	worst.Leaving, worst.State, worst.Cluster = true, true, strings.Repeat("f", 16)
	if b, _ := json.Marshal(worst); len(b) > memberlist.MetaMaxSize {
		m.cancel()
		return fmt.Errorf("%w: gossip metadata of %d bytes exceeds %d (shorten ID or address)", ErrInvalidConfig, len(b), memberlist.MetaMaxSize)
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
	if len(cfg.Gossip.Key) > 0 {
		mc.SecretKey = slices.Clone(cfg.Gossip.Key)
	}
	if cfg.Gossip.AdvertiseAddr != "" {
		host, port, _ := net.SplitHostPort(cfg.Gossip.AdvertiseAddr)
		mc.AdvertiseAddr = host
		mc.AdvertisePort, _ = strconv.Atoi(port)
	}
	if cfg.Gossip.Listener != nil {
		mc.Transport = gossipnet.NewStream(cfg.Gossip.Listener, cfg.Gossip.Dialer, t.ProbeTimeout, t.TCPTimeout)
	} else {
		host, port, _ := net.SplitHostPort(cfg.Gossip.Addr)
		if host == "" {
			host = "0.0.0.0"
		}
		p, _ := strconv.Atoi(port)
		nt, err := gossipnet.NewNet(host, p, mc.Logger)
		if err != nil {
			m.cancel()
			return fmt.Errorf("node: gossip: listen on %s: %w", cfg.Gossip.Addr, err)
		}
		mc.Transport, mc.BindAddr, mc.BindPort = nt, host, nt.GetAutoBindPort()
	}
	ml, err := memberlist.Create(mc)
	if err != nil {
		m.cancel()
		mc.Transport.Shutdown()
		return fmt.Errorf("node: gossip: %w", err)
	}
	m.ml = ml
	m.addr = ml.LocalNode().Address()
	for _, s := range cfg.Gossip.Join {
		if s != m.addr {
			m.seeds = append(m.seeds, s)
		}
	}
	n.members = m

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
			return fmt.Errorf("node: joining the gossip cluster: %w", ctx.Err())
		}
	}
	if err := m.fatalErr(); err != nil {
		return err
	}
	m.log.Info("gossip started", "gossip_addr", m.addr, "seeds", m.seeds, "bootstrap_expect", cfg.BootstrapExpect, "encrypted", len(cfg.Gossip.Key) > 0)
	return nil
}

// shutdownGossip stops memberlist without a leave message. Idempotent.
func (m *gossip) shutdownGossip() {
	m.life.Lock()
	defer m.life.Unlock()
	m.mu.Lock()
	m.down = true
	m.mu.Unlock()
	if err := m.ml.Shutdown(); err != nil {
		m.log.Debug("gossip shutdown", "err", err)
	}
}

// stop ends gossip at once (a crash, or after leave) and waits for the loops.
func (m *gossip) stop() {
	m.cancel()
	m.shutdownGossip()
	m.wg.Wait()
}

// leave is the graceful gossip exit (Close and Leave): broadcast the
// memberlist leave so that members see this node go at once instead of
// suspecting it. Whether the node stays in the Raft configuration depends on
// what it announced before: nothing (a restart: the leader keeps it, and
// reaps it only if it stays away past the reap timeout) or Leaving (Leave:
// the leader has removed it already).
func (m *gossip) leave() {
	m.cancel() // the loops stop; stop() waits for them
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

func (m *gossip) leaveTimeout() time.Duration {
	return 20*m.n.cfg.Timing.HeartbeatTimeout + 10*m.timing.GossipInterval
}

// announceLeaving publishes that this node decommissions (Leave).
func (m *gossip) announceLeaving() {
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
