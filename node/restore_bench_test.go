package node_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/replica"
	"github.com/raftlock/raftlock/internal/testing/clustertest"
	"github.com/raftlock/raftlock/node"
)

// BenchmarkRestoreMillionLocks: a backup of 1,000,000 held locks (100
// sessions) restored into a 3-node cluster over loopback TCP (bolt, fsync
// on, LAN timings), through the leader and through a follower. Reported:
// the backup's size, the restore call's time, the time until every
// replica holds the restored table, the process's peak RSS during the
// restore (three replicas in one process; VmHWM reset before it), and, for
// live sessions on the two other replicas (keepalive every 100 ms) and
// reads there (Stats every 10 ms), the longest keepalive and read while
// the restore ran and the keepalives that failed before the restore ended
// their sessions (lost: must be 0). Linux only (peak RSS from /proc).
// Run with -benchtime=1x.
func BenchmarkRestoreMillionLocks(b *testing.B) {
	const locks = 1_000_000
	backup := bigBackup(b, locks, 0)
	for _, via := range []string{"leader", "follower"} {
		b.Run("via="+via, func(b *testing.B) {
			for range b.N {
				benchRestore(b, backup, locks, via)
			}
		})
	}
}

func benchRestore(b *testing.B, backup []byte, locks int, via string) {
	b.StopTimer()
	c := clustertest.Start(b, clustertest.Options{Nodes: 3, Durable: true, Timing: node.LANTiming()})
	defer c.Close()
	li := c.WaitLeader(30 * time.Second)
	c.WaitReady(30 * time.Second)
	ctx := context.Background()
	r := li
	if via == "follower" {
		r = c.Follower(li)
	}
	var others []*node.Node
	for i, n := range c.Nodes {
		if i != r {
			others = append(others, n)
		}
	}
	// Live sessions on the other replicas, kept alive; reads there.
	var (
		mu                sync.Mutex
		kaMax, readMax    time.Duration
		kaMaxAt           time.Duration // since the restore began
		lost, ended, kept int
		restoring         = true
		began             = time.Now()
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var stopOnce sync.Once
	stopPolls := func() {
		stopOnce.Do(func() { close(stop) })
		wg.Wait()
	}
	defer stopPolls() // before the cluster closes
	for _, n := range others {
		res, err := replica.Of(n).Apply(ctx, fsm.OpenSession{TTL: 10 * time.Second, Description: "live"})
		if err != nil {
			b.Fatal(err)
		}
		s := res.Session
		wg.Add(2)
		go every(&wg, stop, 100*time.Millisecond, func() bool {
			start := time.Now()
			kctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			err := replica.Of(n).KeepAlive(kctx, s)
			cancel()
			took := time.Since(start)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case errors.Is(err, replica.ErrSessionExpired):
				ended++ // the restore ended it
				return false
			case err != nil:
				if lost++; lost <= 3 {
					b.Logf("keepalive through %s failed %v after the restore began: %v", n.ID(), time.Since(began), err)
				}
			default:
				kept++
				if restoring && took > kaMax {
					kaMax, kaMaxAt = took, time.Since(began)
				}
			}
			return true
		})
		go every(&wg, stop, 10*time.Millisecond, func() bool {
			start := time.Now()
			n.Stats()
			took := time.Since(start)
			mu.Lock()
			defer mu.Unlock()
			if restoring {
				readMax = max(readMax, took)
			}
			return true
		})
	}
	time.Sleep(500 * time.Millisecond)
	peakReset := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
	rssBefore := procStatus(b, "VmRSS")

	b.StartTimer()
	start := time.Now()
	mu.Lock()
	began = start
	mu.Unlock()
	rctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	sum, err := c.Nodes[r].Operator().Restore(rctx, bytes.NewReader(backup))
	cancel()
	call := time.Since(start)
	if err != nil {
		b.Fatalf("restore via the %s: %v", via, err)
	}
	for _, n := range c.Nodes {
		for n.Stats().Held != locks {
			time.Sleep(10 * time.Millisecond)
		}
	}
	all := time.Since(start)
	b.StopTimer()
	mu.Lock()
	restoring = false
	mu.Unlock()
	stopPolls()
	if sum.Held != locks {
		b.Fatalf("summary %+v", sum)
	}
	if !peakReset {
		b.Log("VmHWM not reset (no /proc/self/clear_refs): peak RSS is the process's")
	}
	b.ReportMetric(float64(len(backup))/(1<<20), "backup-MiB")
	b.ReportMetric(call.Seconds(), "call-s")
	b.ReportMetric(all.Seconds(), "all-replicas-s")
	b.ReportMetric(float64(rssBefore)/1024, "rss-before-MiB")
	b.ReportMetric(float64(procStatus(b, "VmHWM"))/1024, "peak-rss-MiB")
	b.ReportMetric(float64(kaMax.Milliseconds()), "keepalive-max-ms")
	b.ReportMetric(kaMaxAt.Seconds(), "keepalive-max-at-s")
	b.ReportMetric(float64(readMax.Milliseconds()), "read-max-ms")
	b.ReportMetric(float64(kept), "keepalives-ok")
	b.ReportMetric(float64(lost), "keepalives-lost")
	b.ReportMetric(float64(ended), "sessions-ended")
}

// every runs f every d until stop is closed or f returns false.
func every(wg *sync.WaitGroup, stop <-chan struct{}, d time.Duration, f func() bool) {
	defer wg.Done()
	for {
		select {
		case <-stop:
			return
		case <-time.After(d):
		}
		if !f() {
			return
		}
	}
}

// procStatus returns a field of /proc/self/status in kB.
func procStatus(b *testing.B, field string) int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		b.Skip("no /proc/self/status")
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			v, _ := strconv.ParseInt(strings.Fields(rest)[0], 10, 64)
			return v
		}
	}
	b.Fatalf("no %s in /proc/self/status", field)
	return 0
}
