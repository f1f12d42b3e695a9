package chaos

import (
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/raftlock/raftlock/internal/nodeopts"
	"github.com/raftlock/raftlock/internal/replica"
	"github.com/raftlock/raftlock/internal/testing/clustertest"
	"github.com/raftlock/raftlock/internal/testing/memnet"
	"github.com/raftlock/raftlock/lockapi"
	"github.com/raftlock/raftlock/node"
)

// simConfig is one in-process run.
type simConfig struct {
	Seed     int64
	Class    string        // fault class (register, classNames); "" = "mixed"
	Nodes    int           // nodes at the start
	Spare    int           // nodes the class may add later
	Clients  int           // workers, spread over the nodes
	Locks    int           // size of the lock set
	Duration time.Duration // workload time (fake)
	TTL      time.Duration // session TTL
	// SharedClients are workers that take shared grants (read grants and
	// writes of a read-write lock, a semaphore's permits: inproc_shared).
	SharedClients int
	// LockDelay is the lock-delay of the workers' sessions (0: none).
	LockDelay time.Duration
	Faults    bool // nemesis on
	// LogStore is the nodes' log store (node.Config.LogStore; "": bolt).
	LogStore node.LogStore
	unfenced bool // self-test: the register admits every write
}

func (c simConfig) String() string {
	s := fmt.Sprintf("class %s seed %d: %d nodes, %d clients, %d locks, %v, TTL %v, faults %v", c.Class, c.Seed, c.Nodes, c.Clients, c.Locks, c.Duration, c.TTL, c.Faults)
	if c.LogStore != "" && c.LogStore != node.LogStoreBolt {
		s += ", log store " + string(c.LogStore)
	}
	return s
}

// sim is the state of one cluster's run, inside a synctest bubble. A run
// of the two-clusters class has two sims on one network.
type sim struct {
	t     *testing.T
	cfg   simConfig
	class *faultClass
	rng   *rand.Rand // the nemesis' (test goroutine only)
	net   *memnet.Network
	c     *clustertest.Cluster
	reg   *Register
	col   *collector
	smp   *sampler
	other *sim // the second cluster (two-clusters class)

	nodes  []atomic.Pointer[node.Node] // what workers see; nil while down
	frozen []atomic.Int64              // per node: paused until (UnixNano); 0 = running
	// holding: per worker, the node it runs on while it holds a lease and
	// has not yet written (a target for a pause), else -1.
	holding []atomic.Int32
	// current: per worker, its current session (the operator's targets).
	current []atomic.Pointer[lockapi.Session]
	// clocks: per node, the offset of its wall clock (the WallClock test hook)
	// and the rate of its drift in parts per million.
	clocks []clockState
	// disk: per node, the injected disk fault (the DiskFault test hook).
	disk []diskState
	end  time.Time
	wg   sync.WaitGroup // workers

	mu      sync.Mutex
	h       *History
	backups [][]byte // the operator's backups (History.Backups)
	// keepers: per node, the operator's long-lived session there
	// (nemesis goroutine only).
	keepers  []*lockapi.Session
	nextOp   int
	sessions []*lockapi.Session // workers' sessions left open at the end
	givenUp  []GivenUp
	probes   int
}

func now() int64 { return time.Now().UnixNano() }

// seededRand is a random source for a seed and a stream, well mixed even
// for consecutive seeds.
func seededRand(seed int64, stream uint64) *rand.Rand {
	var b [32]byte
	h := sha256.Sum256([]byte(fmt.Sprintf("raftlock-chaos/%d/%d", seed, stream)))
	copy(b[:], h[:])
	return rand.New(rand.NewChaCha8(b))
}

// debugLogger returns a logger for the nodes when RAFTLOCK_CHAOS_LOG names
// a level (debug, info, warn): text on stderr, fake time. Nil otherwise.
func debugLogger() *slog.Logger {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(os.Getenv("RAFTLOCK_CHAOS_LOG"))); err != nil || os.Getenv("RAFTLOCK_CHAOS_LOG") == "" {
		return nil
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))
}

func newSim(t *testing.T, cfg simConfig, net *memnet.Network, name string) *sim {
	total := cfg.Nodes + cfg.Spare
	s := &sim{
		t: t, cfg: cfg, class: classFor(cfg.Class),
		rng: seededRand(cfg.Seed, 0x6a09e667^uint64(len(name))),
		net: net,
		reg: NewRegister(),
		h: &History{
			Layer: "in-process", Class: cfg.Class, Cluster: name, Seed: cfg.Seed, Nodes: cfg.Nodes, TTL: int64(cfg.TTL),
			Faults: map[string]int{}, LockDelay: int64(cfg.LockDelay), ElectionTimeout: int64(nodeopts.TestTiming().ElectionTimeout),
		},
		nodes:   make([]atomic.Pointer[node.Node], total),
		frozen:  make([]atomic.Int64, total),
		holding: make([]atomic.Int32, cfg.Clients+cfg.SharedClients),
		current: make([]atomic.Pointer[lockapi.Session], cfg.Clients+cfg.SharedClients),
		clocks:  make([]clockState, total),
		disk:    make([]diskState, total),
		keepers: make([]*lockapi.Session, total),
	}
	s.reg.Unfenced = cfg.unfenced
	s.col = newCollector(s)
	s.smp = newSampler(s)
	for i := range s.holding {
		s.holding[i].Store(-1)
	}
	return s
}

func (s *sim) addOp(op Op) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	op.ID = s.nextOp
	s.nextOp++
	s.h.Ops = append(s.h.Ops, op)
	return len(s.h.Ops) - 1
}

// addDelaySession records a session opened with the workload's lock-delay.
func (s *sim) addDelaySession(id uint64) {
	s.mu.Lock()
	s.h.DelaySessions = append(s.h.DelaySessions, id)
	s.mu.Unlock()
}

func (s *sim) addWrite(w Write) {
	s.mu.Lock()
	s.h.Writes = append(s.h.Writes, w)
	s.mu.Unlock()
}

func (s *sim) note(format string, args ...any) {
	s.mu.Lock()
	s.h.Notes = append(s.h.Notes, fmt.Sprintf(format, args...))
	s.mu.Unlock()
}

func (s *sim) harnessError(format string, args ...any) {
	s.mu.Lock()
	s.h.HarnessErrors = append(s.h.HarnessErrors, fmt.Sprintf(format, args...))
	s.mu.Unlock()
}

// fault counts a fault and returns a function that records its end.
func (s *sim) fault(kind, target string) func() { return s.faultCut(kind, target, nil) }

// faultCut is fault for a fault that cuts the nodes cut (indexes) off from
// every quorum (FaultEvent.Cut).
func (s *sim) faultCut(kind, target string, cut []int) func() {
	s.mu.Lock()
	s.h.AddFault(kind)
	s.mu.Unlock()
	var ids []string
	for _, i := range cut {
		ids = append(ids, s.c.ID(i))
	}
	start := now()
	return func() {
		s.mu.Lock()
		s.h.Nemesis = append(s.h.Nemesis, FaultEvent{Kind: kind, Target: target, Start: start, End: now(), Cut: ids})
		s.mu.Unlock()
	}
}

// simulate runs one in-process run (one or two clusters) in the caller's
// synctest bubble and returns its histories (checked by the caller,
// outside the bubble: porcupine's timeout needs real time).
func simulate(t *testing.T, cfg simConfig) []*History {
	if cfg.Class == "" {
		cfg.Class = "mixed"
	}
	net := memnet.New()
	s := newSim(t, cfg, net, "")
	sims := []*sim{s}
	if s.class.second != nil {
		bcfg := s.class.second(cfg)
		s.other = newSim(t, bcfg, net, "b")
		s.h.Cluster = "a"
		sims = append(sims, s.other)
	}
	for _, x := range sims {
		x.startCluster()
	}
	for _, x := range sims {
		x.startWorkload()
	}
	if cfg.Faults {
		s.class.nemesis(s)
	} else {
		time.Sleep(time.Until(s.end))
	}
	for _, x := range sims {
		x.healAll()
	}
	var out []*History
	for _, x := range sims {
		x.wg.Wait()
		x.h.End = now()
		x.finish()
		out = append(out, x.h)
	}
	return out
}

// startCluster starts this sim's cluster as its class says (by default:
// all nodes, then waits for a leader) and publishes the nodes.
func (s *sim) startCluster() {
	opts := clustertest.Options{Nodes: s.cfg.Nodes, Net: s.net, Durable: true, LogStore: s.cfg.LogStore}
	if s.h.Cluster == "b" {
		opts.Prefix, opts.Subnet = "b", 1
	}
	s.class.options(s, &opts)
	configure := opts.Configure
	opts.Configure = func(i int, c *node.Config) {
		// Snapshots and log compaction happen during the run, so restarts
		// restore from snapshots and lagging followers are sent one.
		c.SnapshotThreshold = 256
		c.TrailingLogs = 64
		c.SnapshotInterval = 500 * time.Millisecond
		// New and replaced members are promoted after this (the default,
		// 10 s, is long for runs of tens of seconds with a 1 s TTL).
		c.Stabilization = 2 * time.Second
		h := nodeopts.Hooks(c)
		h.WallClock = s.wallClock(i)
		h.DiskFault = s.diskFault(i)
		if l := debugLogger(); l != nil {
			c.Logger = l
		}
		if configure != nil {
			configure(i, c)
		}
	}
	// Events are observed from each node's start: the entries that form
	// the cluster (cluster version, cluster id) are applied before the
	// nodes are ready, and the disk cross-check replays them whenever the
	// whole log is still on disk.
	started := opts.Started
	opts.Started = func(i int, n *node.Node) {
		s.col.watch(n.ID(), n)
		if started != nil {
			started(i, n)
		}
	}
	s.c = clustertest.Start(s.t, opts)
	if s.class.start != nil {
		s.class.start(s)
	} else {
		s.c.WaitLeader(30 * time.Second)
		s.c.WaitReady(30 * time.Second)
	}
	for i := range s.c.Nodes {
		if s.c.Nodes[i] != nil {
			s.up(i)
		}
	}
	s.h.Expect = s.class.expect(s)
	s.h.Expect.ExactlyOnce = true // every in-process cluster runs this release
	if s.cfg.SharedClients > 0 {
		s.h.Primitives = primitives()
	}
}

// startWorkload starts the workers and the sampler.
func (s *sim) startWorkload() {
	s.h.Start = now()
	s.end = time.Now().Add(s.cfg.Duration)
	if s.other != nil {
		s.other.end = s.end
	}
	s.smp.start()
	for w := range s.cfg.Clients {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.worker(w)
		}()
	}
	for w := range s.cfg.SharedClients {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.sharedWorker(s.cfg.Clients + w)
		}()
	}
}

// up publishes node i to the workers (its events are observed from its
// start: Options.Started in startCluster).
func (s *sim) up(i int) { s.nodes[i].Store(s.c.Nodes[i]) }

// finish ends the run: resume probes, the end state, the lock probes, the
// workers' sessions closed, convergence and the disk cross-check.
func (s *sim) finish() {
	healed := now()
	s.resumeProbes(healed)
	s.captureEndState()
	s.lockProbes()
	s.closeSessions()
	s.settle()
	s.smp.stop()
	s.col.stopAll()
	s.h.Final = s.reg.Final()
	s.h.Log = s.col.events()
	s.h.Resyncs = s.col.resyncList()
	s.h.LeaseTrace = s.col.lease.Events()
	s.h.Disagreements = append(s.h.Disagreements, s.col.problems()...)
	s.crossCheckDisk()
}

// closeSessions closes the sessions the workers left open.
func (s *sim) closeSessions() {
	s.mu.Lock()
	sessions := s.sessions
	s.sessions = nil
	s.mu.Unlock()
	for _, sess := range sessions {
		s.closeSession(sess, 2*s.cfg.TTL)
	}
}

// settle waits until the healed cluster has one leader and every replica
// has applied the same index, and records their digests.
func (s *sim) settle() {
	start := now()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for attempt := 0; ; attempt++ {
		if attempt == 300 || ctx.Err() != nil {
			// Not a harness problem: a healed cluster that does not
			// converge is not available.
			s.h.Probes = append(s.h.Probes, Probe{What: "replicas converge after healing", Node: "all", Start: start, Deadline: now(),
				Err: "no common applied index: " + s.c.Describe()})
			return
		}
		var ds []Digest
		same := true
		for _, n := range s.running() {
			if err := n.Sync(ctx); err != nil {
				same = false
				break
			}
			i, d := replica.ServerOf(n).Digest()
			ds = append(ds, Digest{Node: n.ID(), Index: i, Hash: fmt.Sprintf("%x", d[:8])})
			same = same && i == ds[0].Index
		}
		if same && len(ds) > 0 {
			s.h.Digests = ds
			for _, n := range s.running() {
				s.h.LogTokens = uint64(n.Stats().LastToken)
				break
			}
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// running returns the running nodes.
func (s *sim) running() []*node.Node {
	var out []*node.Node
	for _, n := range s.c.Nodes {
		if n != nil {
			out = append(out, n)
		}
	}
	return out
}
