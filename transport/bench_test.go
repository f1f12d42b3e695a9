package transport

import (
	"context"
	"crypto/tls"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkRPC measures Call round trips on loopback TCP: plaintext and
// mutual TLS, with 1 and 64 concurrent callers. Besides ns/op (wall time
// per call, i.e. 1/throughput) it reports calls/s and the p50/p99 latency
// of individual calls.
func BenchmarkRPC(b *testing.B) {
	ca := newTestCA(b, "ca")
	for _, mode := range []struct {
		name string
		tls  func(string) *tls.Config
	}{
		{"plain", func(string) *tls.Config { return nil }},
		{"mTLS", func(n string) *tls.Config { return ca.tlsConfig(b, n) }},
	} {
		for _, callers := range []int{1, 64} {
			b.Run(fmt.Sprintf("%s/callers=%d", mode.name, callers), func(b *testing.B) {
				benchRPC(b, mode.tls, callers, 0)
			})
		}
	}
}

// BenchmarkRPCIdle: one caller with a millisecond of idleness between
// calls, as a forwarded command between two commits: each call then wakes
// parked threads on both sides, which a back-to-back loop never measures.
func BenchmarkRPCIdle(b *testing.B) {
	benchRPC(b, func(string) *tls.Config { return nil }, 1, time.Millisecond)
}

// benchRPC runs callers closed loops of Call, each sleeping gap between
// its calls.
func benchRPC(b *testing.B, tlsFor func(string) *tls.Config, callers int, gap time.Duration) {
	srv := startTransport(b, testConfig(tlsFor("srv")), echo)
	cli := startTransport(b, testConfig(tlsFor("cli")), nil)
	ctx := context.Background()
	req := make([]byte, 64)
	// Warm up: dial the pooled connections.
	for range 2 * defaultRPCConnsPerPeer {
		if _, err := cli.Call(ctx, srv.Addr(), req); err != nil {
			b.Fatal(err)
		}
	}
	lat := make([][]time.Duration, callers)
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for g := range callers {
		wg.Go(func() {
			mine := make([]time.Duration, 0, b.N/callers+1)
			for next.Add(1) <= int64(b.N) {
				t0 := time.Now()
				if _, err := cli.Call(ctx, srv.Addr(), req); err != nil {
					b.Error(err)
					return
				}
				mine = append(mine, time.Since(t0))
				if gap > 0 {
					time.Sleep(gap)
				}
			}
			lat[g] = mine
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	all := slices.Concat(lat...)
	slices.Sort(all)
	if len(all) > 0 {
		b.ReportMetric(float64(all[len(all)/2].Microseconds()), "p50-µs")
		b.ReportMetric(float64(all[len(all)*99/100].Microseconds()), "p99-µs")
	}
	b.ReportMetric(float64(len(all))/elapsed.Seconds(), "calls/s")
}
