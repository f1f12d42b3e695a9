package node_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/lockinfo"
	"github.com/raftlock/raftlock/internal/replica"
	"github.com/raftlock/raftlock/internal/testing/clustertest"
	"github.com/raftlock/raftlock/node"
)

// BenchmarkPropose: proposals per second on a 3-node cluster over loopback
// TCP with bolt (fsync on) and LAN timings, from the leader's process and
// from a follower's (forwarded), with 1, 16 and 64 concurrent callers. Each
// op is one command (acquire or release of the caller's own lock, taking
// turns). Reports p50/p99 latency.
func BenchmarkPropose(b *testing.B) {
	c, regs, leader := startMetered(b)
	for _, where := range []string{"leader", "follower"} {
		n := c.Nodes[leader]
		if where == "follower" {
			n = c.Nodes[c.Follower(leader)]
		}
		for _, callers := range []int{1, 16, 64} {
			b.Run(fmt.Sprintf("%s/callers=%d", where, callers), func(b *testing.B) {
				reportBatches(b, regs[leader], func() { benchPropose(b, n, callers) })
			})
		}
	}
}

// BenchmarkProposeSpread: the bench's distinct-lock workload in one
// process — 16 or 64 callers spread evenly over the three nodes, each
// proposing (Propose, as lockapi does) acquire and release of its own lock
// in turn; two thirds of them forward. cmds/batch shows how full group
// commit packs the leader's entries against the callers there are.
func BenchmarkProposeSpread(b *testing.B) {
	c, regs, leader := startMetered(b)
	for _, callers := range []int{16, 64} {
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
			reportBatches(b, regs[leader], func() { benchCallers(b, c.Nodes, callers, false) })
		})
	}
}

// startMetered starts a 3-node cluster over loopback TCP (bolt, fsync on,
// LAN timings) with a Prometheus registry per node, and returns it with the
// registries and the leader's index once every node is ready.
func startMetered(b *testing.B) (*clustertest.Cluster, []*prometheus.Registry, int) {
	regs := make([]*prometheus.Registry, 3)
	c := clustertest.Start(b, clustertest.Options{Nodes: 3, Durable: true, Timing: node.LANTiming(),
		Configure: func(i int, cfg *node.Config) {
			regs[i] = prometheus.NewRegistry()
			cfg.Registerer = regs[i]
		}})
	leader := c.WaitLeader(30 * time.Second)
	c.WaitReady(30 * time.Second)
	return c, regs, leader
}

// batchTotals are the leader's group-commit counters: entries, commands in
// them, and seconds from raft.Apply to the applied result, summed.
type batchTotals struct{ batches, commands, seconds float64 }

func commitStats(b *testing.B, reg *prometheus.Registry) batchTotals {
	mfs, err := reg.Gather()
	if err != nil {
		b.Fatal(err)
	}
	var t batchTotals
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			h := m.GetHistogram()
			switch mf.GetName() {
			case "raftlock_node_batch_commands":
				t.batches, t.commands = float64(h.GetSampleCount()), h.GetSampleSum()
			case "raftlock_node_apply_duration_seconds":
				t.seconds = h.GetSampleSum()
			}
		}
	}
	return t
}

func benchPropose(b *testing.B, n *node.Node, callers int) {
	benchCallers(b, []*node.Node{n}, callers, true)
}

// benchCallers runs callers closed-loop goroutines, spread evenly over nodes
// (caller w on nodes[w%len(nodes)], with a session there), each committing
// acquire and release of its own lock in turn — with Apply (apply) or
// Propose — and reports proposals/s and the latency percentiles.
func benchCallers(b *testing.B, nodes []*node.Node, callers int, apply bool) {
	ctx := context.Background()
	sessions := make([]lockinfo.SessionID, len(nodes))
	for i, n := range nodes {
		r, err := replica.Of(n).Apply(ctx, fsm.OpenSession{TTL: time.Hour})
		if err != nil {
			b.Fatal(err)
		}
		sessions[i] = r.Session
	}
	lat := make([][]time.Duration, callers)
	var wg sync.WaitGroup
	per := (b.N + callers - 1) / callers
	b.ResetTimer()
	start := time.Now()
	for w := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, s := nodes[w%len(nodes)], sessions[w%len(nodes)]
			owner := newOwner()
			name := fmt.Sprintf("bench-%d-%d", s, w)
			for i := range per {
				var cmd fsm.Command = fsm.Acquire{Session: s, Lock: name, Owner: owner}
				if i%2 == 1 {
					cmd = fsm.Release{Lock: name, Owner: owner}
				}
				t0 := time.Now()
				var err error
				if apply {
					_, err = replica.Of(n).Apply(ctx, cmd)
				} else {
					_, _, err = replica.Of(n).Propose(ctx, cmd)
				}
				if err != nil {
					b.Error(err)
					return
				}
				lat[w] = append(lat[w], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	all := slices.Concat(lat...)
	slices.Sort(all)
	b.ReportMetric(float64(len(all))/elapsed.Seconds(), "proposals/s")
	b.ReportMetric(float64(pct(all, 0.50).Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(pct(all, 0.99).Microseconds())/1000, "p99-ms")
	for i, n := range nodes {
		replica.Of(n).Apply(ctx, fsm.CloseSession{Session: sessions[i]})
	}
}

// reportBatches runs run and reports the leader's commands per entry and
// commit time over it (reg is the leader's registry).
func reportBatches(b *testing.B, reg *prometheus.Registry, run func()) {
	before := commitStats(b, reg)
	run()
	after := commitStats(b, reg)
	if batches := after.batches - before.batches; batches > 0 {
		b.ReportMetric((after.commands-before.commands)/batches, "cmds/batch")
		b.ReportMetric(1000*(after.seconds-before.seconds)/batches, "batch-ms")
	}
}

func pct(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(p*float64(len(sorted))))]
}

// BenchmarkFsync: the limit under every commit — a 4 KiB append followed by
// fdatasync in the benchmark's temp dir (the same file system as the bolt
// stores above). hashicorp/raft syncs the leader's log before replicating,
// and each bolt commit syncs; one proposal costs at least two of these in
// sequence.
func BenchmarkFsync(b *testing.B) {
	f, err := os.Create(filepath.Join(b.TempDir(), "fsync"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		if _, err := f.Write(buf); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(pct(lat, 0.50).Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(pct(lat, 0.99).Microseconds())/1000, "p99-ms")
}
