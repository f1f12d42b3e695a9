package node_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/clustertest"
	"github.com/raftlock/raftlock/node"
)

// BenchmarkProposeSpread: the bench's distinct-lock workload in one
// process — 16 or 64 callers spread evenly over the three nodes of a
// loopback cluster (bolt, fsync on, LAN timings), each proposing (Propose,
// as lockapi does) acquire and release of its own lock in turn. Two thirds
// of them forward. Reports proposals/s, the leader's commands per entry
// (how full group commit packs its entries against the callers there are)
// and its entry commit time.
func BenchmarkProposeSpread(b *testing.B) {
	regs := make([]*prometheus.Registry, 3)
	c := clustertest.Start(b, clustertest.Options{Nodes: 3, Durable: true, Timing: node.LANTiming(),
		Configure: func(i int, cfg *node.Config) {
			regs[i] = prometheus.NewRegistry()
			cfg.Registerer = regs[i]
		}})
	leader := c.WaitLeader(30 * time.Second)
	c.WaitReady(30 * time.Second)
	for _, callers := range []int{16, 64} {
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
			before := commitStats(b, regs[leader])
			benchSpread(b, c.Nodes, callers)
			after := commitStats(b, regs[leader])
			if batches := after.batches - before.batches; batches > 0 {
				b.ReportMetric((after.commands-before.commands)/batches, "cmds/batch")
				b.ReportMetric(1000*(after.seconds-before.seconds)/batches, "batch-ms")
			}
		})
	}
}

func benchSpread(b *testing.B, nodes []*node.Node, callers int) {
	ctx := context.Background()
	sessions := make([]fsm.SessionID, len(nodes))
	for i, n := range nodes {
		r, err := n.Apply(ctx, fsm.OpenSession{TTL: time.Hour})
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
			name := fmt.Sprintf("spread-%d-%d", s, w)
			for i := range per {
				var cmd fsm.Command = fsm.Acquire{Session: s, Lock: name, Owner: owner}
				if i%2 == 1 {
					cmd = fsm.Release{Lock: name, Owner: owner}
				}
				t0 := time.Now()
				if _, _, err := n.Propose(ctx, cmd); err != nil {
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
	for i, n := range nodes {
		n.Apply(ctx, fsm.CloseSession{Session: sessions[i]})
	}
}
