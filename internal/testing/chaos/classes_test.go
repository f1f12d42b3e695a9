package chaos

import (
	"fmt"
	"os"
	"sort"
	"time"

	"github.com/raftlock/raftlock/internal/storage"
	"github.com/raftlock/raftlock/internal/testing/clustertest"
	"github.com/raftlock/raftlock/node"
)

// faultClass is one kind of fault the nemesis injects, with the cluster
// it needs and the model of what a correct cluster does under it (its
// README, "In-process fault classes" and "Multi-process fault classes").
type faultClass struct {
	name string
	// shape adjusts the run for its seed (nodes, spares, lock-delay…).
	shape func(cfg *simConfig)
	// options adjusts the cluster (gossip, deferred nodes, configs).
	options func(s *sim, o *clustertest.Options)
	// start brings the cluster up; nil: all nodes, then wait for a leader.
	start func(s *sim)
	// expect is the model of a correct cluster (members, unreachable
	// members, odd voters); nil: the cluster's own nodes are the members.
	expect func(s *sim) Expect
	// nemesis injects faults until s.end (one at a time, each bounded).
	nemesis func(s *sim)
	// gone reports nodes that must stay down at the end (decommissioned).
	gone func(s *sim, i int) bool
	// second, if set, runs a second cluster with this config beside the
	// first (two-clusters class).
	second func(cfg simConfig) simConfig
}

var classes = map[string]*faultClass{}

func register(c *faultClass) {
	if c.options == nil {
		c.options = func(*sim, *clustertest.Options) {}
	}
	if c.expect == nil {
		c.expect = func(s *sim) Expect { return Expect{Members: s.members()} }
	}
	classes[c.name] = c
}

// classNames lists the registered classes in order.
func classNames() []string {
	var out []string
	for n := range classes {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func classFor(name string) *faultClass {
	c, ok := classes[name]
	if !ok {
		panic(fmt.Sprintf("chaos: unknown fault class %q (have %v)", name, classNames()))
	}
	return c
}

// members are every node id of the sim's cluster.
func (s *sim) members() []string {
	var out []string
	for i := range s.c.Size() {
		out = append(out, s.c.ID(i))
	}
	return out
}

// baseConfig is the run shape every class starts from: odd seeds run 3
// nodes, even ones 5.
func baseConfig(class string, seed int64, d time.Duration) simConfig {
	n := 3
	if seed%2 == 0 {
		n = 5
	}
	cfg := simConfig{Seed: seed, Class: class, Nodes: n, Clients: 2 * n, Locks: 3, Duration: d, TTL: time.Second, Faults: true}
	if c := classFor(class); c.shape != nil {
		c.shape(&cfg)
	}
	cfg.LogStore = logStoreFor(class, seed)
	return cfg
}

// logStoreFor is the log store of a run: RAFTLOCK_CHAOS_STORE (bolt or
// wal) for every class; otherwise bolt, except that in a build with the WAL
// (build tag raftwal) the crash-restart classes (restart, disk) run it on
// the seeds ≡ 2, 3 (mod 4) — with seeds 1..3, bolt on 3 nodes and the WAL
// on 5 and on 3. (These seeds ran
// bolt only while raft-wal v0.4.0's tail-truncation defect,
// hashicorp/raft-wal#31, made a restarted node panic; v0.4.2 fixes it,
// TestWALRestartsAfterTailTruncation.)
func logStoreFor(class string, seed int64) node.LogStore {
	if v := os.Getenv("RAFTLOCK_CHAOS_STORE"); v != "" {
		return node.LogStore(v)
	}
	if (class == "restart" || class == "disk") && seed%4 >= 2 && storage.WALBuilt {
		return node.LogStoreWAL
	}
	return node.LogStoreBolt
}

// sleepUntilEnd sleeps for d, or until the end of the workload if sooner;
// it reports whether the workload still runs afterwards.
func (s *sim) sleepUntilEnd(d time.Duration) bool {
	if left := time.Until(s.end); left < d {
		d = left
	}
	if d > 0 {
		time.Sleep(d)
	}
	return time.Now().Before(s.end)
}

// gap is a random pause between two faults (up to one TTL).
func (s *sim) gap() time.Duration { return time.Duration(s.rng.Int64N(int64(s.cfg.TTL))) }

// hold is a random fault duration (a quarter to two and a quarter TTLs).
func (s *sim) hold() time.Duration {
	return s.cfg.TTL/4 + time.Duration(s.rng.Int64N(int64(2*s.cfg.TTL)))
}
