package lockapi

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/raftlock/raftlock/internal/replica"
	"github.com/raftlock/raftlock/internal/testing/clustertest"
	"github.com/raftlock/raftlock/node"
)

// The lock benchmarks run a 3-node cluster in this process over loopback TCP
// with bolt stores (fsync on) and LAN timings. Workers run on a follower's
// node (the common case for an embedded library: 2 of 3 replicas are
// followers) unless the name says leader.

func benchCluster(b *testing.B) (*clustertest.Cluster, int) {
	c := clustertest.Start(b, clustertest.Options{Nodes: 3, Durable: true, Timing: node.LANTiming()})
	leader := c.WaitLeader(30 * time.Second)
	c.WaitReady(30 * time.Second)
	return c, leader
}

func benchSession(b *testing.B, n *node.Node) *Session {
	m, err := NewMetrics(nil)
	if err != nil {
		b.Fatal(err)
	}
	s, err := NewSession(context.Background(), n, WithTTL(10*time.Second), WithMetrics(m))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close(context.Background()) })
	return s
}

// cpuTime is the CPU time (user+system) this process has used so far: all
// three replicas of the in-process cluster.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func report(b *testing.B, lat []time.Duration, ops int, elapsed, cpu time.Duration, unit string) {
	slices.Sort(lat)
	at := func(p float64) float64 {
		if len(lat) == 0 {
			return 0
		}
		return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds()) / 1000
	}
	b.ReportMetric(float64(ops)/elapsed.Seconds(), unit)
	b.ReportMetric(at(0.50), "p50-ms")
	b.ReportMetric(at(0.99), "p99-ms")
	// CPU per operation across the three replicas: what a busy machine
	// charges for each one.
	b.ReportMetric(float64(cpu.Microseconds())/float64(max(ops, 1)), "cpu-us/op")
}

// BenchmarkLockUnlock: Lock+Unlock pairs, each worker on its own lock.
func BenchmarkLockUnlock(b *testing.B) {
	c, leader := benchCluster(b)
	for _, tc := range []struct {
		where   string
		workers int
	}{{"follower", 1}, {"leader", 1}, {"follower", 16}, {"follower", 64}} {
		b.Run(fmt.Sprintf("%s/workers=%d", tc.where, tc.workers), func(b *testing.B) {
			n := c.Nodes[c.Follower(leader)]
			if tc.where == "leader" {
				n = c.Nodes[leader]
			}
			s := benchSession(b, n)
			ops := lockUnlockLoop(b, tc.workers, func(int) *Session { return s })
			reportStrays(b, ops, s)
		})
	}
}

// BenchmarkLockUnlockCPU: the CPU each Lock+Unlock costs the three replicas
// of an in-memory cluster (no fsync, whose kernel time would swamp it): 64
// workers spread over the three nodes as the bench's distinct-lock workload
// spreads them over its processes, each with its own session and lock.
// cpu-us/op is the figure to watch; on a machine whose cores are shared the
// distinct-lock rows of the bench move with it.
func BenchmarkLockUnlockCPU(b *testing.B) {
	c := clustertest.Start(b, clustertest.Options{Nodes: 3, Timing: node.LANTiming()})
	c.WaitLeader(30 * time.Second)
	c.WaitReady(30 * time.Second)
	const workers = 64
	sessions := make([]*Session, workers)
	for w := range sessions {
		sessions[w] = benchSession(b, c.Nodes[w%len(c.Nodes)])
	}
	lockUnlockLoop(b, workers, func(w int) *Session { return sessions[w] })
}

// lockUnlockLoop runs b.N Lock+Unlock pairs on workers goroutines, worker w
// on its own lock through session(w), reports the rate, latency and CPU per
// pair, and returns the pairs done.
func lockUnlockLoop(b *testing.B, workers int, session func(w int) *Session) int {
	ctx := context.Background()
	per := (b.N + workers - 1) / workers
	lat := make([][]time.Duration, workers)
	var wg sync.WaitGroup
	b.ResetTimer()
	start, cpu0 := time.Now(), cpuTime()
	for w := range workers {
		s := session(w)
		wg.Go(func() {
			name := fmt.Sprintf("bench:%d:%d", s.ID(), w)
			for range per {
				t0 := time.Now()
				l, err := s.Lock(ctx, name)
				if err != nil {
					b.Error(err)
					return
				}
				if err := l.Unlock(ctx); err != nil {
					b.Error(err)
					return
				}
				lat[w] = append(lat[w], time.Since(t0))
			}
		})
	}
	wg.Wait()
	elapsed, cpu := time.Since(start), cpuTime()-cpu0
	b.StopTimer()
	report(b, slices.Concat(lat...), per*workers, elapsed, cpu, "lock+unlock/s")
	return per * workers
}

// BenchmarkHandoff: 8 workers (on all three replicas) contend for one lock;
// reports handoffs/s and the release-to-next-grant latency.
func BenchmarkHandoff(b *testing.B) {
	c, _ := benchCluster(b)
	ctx := context.Background()
	sessions := make([]*Session, 8)
	for i := range sessions {
		sessions[i] = benchSession(b, c.Nodes[i%3])
	}
	var mu sync.Mutex
	var lastRelease time.Time
	var gaps []time.Duration
	grants := 0
	var wg sync.WaitGroup
	b.ResetTimer()
	start, cpu0 := time.Now(), cpuTime()
	first := replica.Of(c.Nodes[0]).AppliedIndex()
	for _, s := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				l, err := s.Lock(ctx, "hot")
				if err != nil {
					b.Error(err)
					return
				}
				mu.Lock()
				if !lastRelease.IsZero() {
					gaps = append(gaps, time.Since(lastRelease))
				}
				grants++
				done := grants >= b.N
				lastRelease = time.Now()
				mu.Unlock()
				if err := l.Unlock(ctx); err != nil {
					b.Error(err)
					return
				}
				if done {
					return
				}
			}
		}()
		if b.Failed() {
			return
		}
	}
	// Stop the others once b.N grants happened: each waiter still queued
	// gets the lock once more and then sees grants >= b.N.
	wg.Wait()
	elapsed, cpu := time.Since(start), cpuTime()-cpu0
	b.StopTimer()
	report(b, gaps, grants, elapsed, cpu, "handoffs/s")
	b.ReportMetric(float64(replica.Of(c.Nodes[0]).AppliedIndex()-first)/float64(grants), "entries/handoff")
	reportStrays(b, grants, sessions...)
}

// reportStrays reports the releases of acquisitions the sessions did not
// know, per operation: extra commands that a race between an Unlock and the
// local replica's apply of the grant would cost.
func reportStrays(b *testing.B, ops int, sessions ...*Session) {
	n := 0.0
	for _, s := range sessions {
		n += metricValue(s.metrics.strayReleases)
	}
	b.ReportMetric(n/float64(max(ops, 1)), "strays/op")
}
