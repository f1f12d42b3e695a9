package node_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/replica"
	"github.com/raftlock/raftlock/internal/testing/clustertest"
	"github.com/raftlock/raftlock/node"
)

// BenchmarkOverRaft: what raftlock's leader path costs over the raft it runs
// on. One caller on the leader of a 3-node cluster (loopback TCP, bolt with
// fsync, LAN timings) commits one command at a time, alternating acquire and
// release of its lock, three ways in turn on the same cluster: raw (the
// encoded entry straight into raft.Apply), propose (node.Propose: the
// proposer's batch goroutine, version checks, result decoding) and apply
// (node.Apply: Propose plus the wait for the local FSM). Rounds alternate
// so that the machine's drift falls on all three alike; compare cmds/s and
// p50 within a round.
func BenchmarkOverRaft(b *testing.B) {
	for _, store := range logStores {
		b.Run("store="+string(store), func(b *testing.B) { benchOverRaft(b, store) })
	}
}

func benchOverRaft(b *testing.B, store node.LogStore) {
	c := clustertest.Start(b, clustertest.Options{Nodes: 3, Durable: true, Timing: node.LANTiming(),
		Configure: func(_ int, cfg *node.Config) { cfg.LogStore = store }})
	leader := c.WaitLeader(30 * time.Second)
	c.WaitReady(30 * time.Second)
	n := c.Nodes[leader]
	ctx := context.Background()
	r, err := replica.Of(n).Apply(ctx, fsm.OpenSession{TTL: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	s, owner := r.Session, newOwner()
	name := fmt.Sprintf("bench-%d", s)
	commit := map[string]func(fsm.Command) error{
		"raw": func(cmd fsm.Command) error {
			data, err := fsm.EncodeEntry(fsm.Entry{At: time.Now().UnixNano(), Commands: []fsm.Command{cmd}})
			if err != nil {
				return err
			}
			return node.ApplyRaw(n, data)
		},
		"propose": func(cmd fsm.Command) error { _, _, err := replica.Of(n).Propose(ctx, cmd); return err },
		"apply":   func(cmd fsm.Command) error { _, err := replica.Of(n).Apply(ctx, cmd); return err },
	}
	for round := range 3 {
		for _, mode := range []string{"raw", "propose", "apply"} {
			b.Run(fmt.Sprintf("round=%d/%s", round, mode), func(b *testing.B) {
				lat := make([]time.Duration, 0, b.N)
				start := time.Now()
				for i := range b.N {
					var cmd fsm.Command = fsm.Acquire{Session: s, Lock: name, Owner: owner}
					if i%2 == 1 {
						cmd = fsm.Release{Lock: name, Owner: owner}
					}
					t0 := time.Now()
					if err := commit[mode](cmd); err != nil {
						b.Fatal(err)
					}
					lat = append(lat, time.Since(t0))
				}
				elapsed := time.Since(start)
				slices.Sort(lat)
				b.ReportMetric(float64(b.N)/elapsed.Seconds(), "cmds/s")
				b.ReportMetric(float64(pct(lat, 0.50).Microseconds())/1000, "p50-ms")
			})
		}
	}
}
