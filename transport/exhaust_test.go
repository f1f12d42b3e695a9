package transport

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"
)

// The benchmarks in this file are the memory-exhaustion programs of issue
// 20 #4: hostile clients open connections and send partial input, and the
// benchmark reports how much heap the node holds for them (held-MiB, after
// a GC) and how many of the connections the node still keeps open
// (open-conns). They are bounded in count and time; run them with
//
//	go test ./transport -run '^$' -bench Exhaust -benchtime 1x

// exhaustSources is the number of distinct loopback source addresses the
// hostile connections come from (127.0.1.1, 127.0.1.2, …): 1 models one
// attacking host, many a botnet.
var exhaustSources = []int{1, 200}

// dialFrom dials addr from the i-th hostile source address.
func dialFrom(ctx context.Context, addr string, i, sources int) (net.Conn, error) {
	src := i % sources
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, byte(1+src/250), byte(1+src%250))}}
	return d.DialContext(ctx, "tcp", addr)
}

// heldHeap returns the live heap after a GC.
func heldHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// settledHeap polls the live heap until it stops growing (three polls in a
// row without growth of more than 1 MiB) or bound passes.
func settledHeap(bound time.Duration) uint64 {
	end := time.Now().Add(bound)
	last, still := heldHeap(), 0
	for still < 3 && time.Now().Before(end) {
		time.Sleep(200 * time.Millisecond)
		h := heldHeap()
		if h > last+1<<20 {
			still = 0
		} else {
			still++
		}
		last = max(last, h)
	}
	return last
}

// openConns counts the connections the peer has not closed: a read that
// does not fail within a short time means the connection is still open.
func openConns(conns []net.Conn) int {
	var n int
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Go(func() {
			c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
			_, err := io.Copy(io.Discard, c)
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				mu.Lock()
				n++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return n
}

// exhaust runs one hostile scenario: open conns connections to srv from
// sources source addresses, run send on each (in parallel), wait for the
// heap to settle and report it and the connections still open. It returns
// the connections, closed when the benchmark ends.
func exhaust(b *testing.B, srv *Transport, conns, sources int, send func(c net.Conn) error) []net.Conn {
	b.Helper()
	base := heldHeap()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	open := make([]net.Conn, 0, conns)
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	for i := range conns {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			c, err := dialFrom(ctx, srv.Addr(), i, sources)
			if err != nil {
				return
			}
			mu.Lock()
			open = append(open, c)
			mu.Unlock()
			send(c)
		})
	}
	wg.Wait()
	b.Cleanup(func() {
		for _, c := range open {
			c.Close()
		}
	})
	held := settledHeap(10 * time.Second)
	b.ReportMetric(float64(held-min(held, base))/(1<<20), "held-MiB")
	b.ReportMetric(float64(runtime.NumGoroutine()), "goroutines")
	b.ReportMetric(float64(openConns(open)), "open-conns")
	return open
}

// BenchmarkExhaustHeaderOnly: RPC connections that send a request header
// declaring a 16 MiB payload and then nothing.
func BenchmarkExhaustHeaderOnly(b *testing.B) {
	for _, sources := range exhaustSources {
		b.Run(fmt.Sprintf("conns=64/sources=%d", sources), func(b *testing.B) {
			for range b.N {
				cfg := testConfig(nil)
				srv := startTransport(b, cfg, echo)
				hdr := newFrame(kindRequest, 0, 1, 0, nil)
				binary.BigEndian.PutUint32(hdr[4:8], defaultMaxMessageSize)
				exhaust(b, srv, 64, sources, func(c net.Conn) error {
					_, err := c.Write(append([]byte{protoRPC, versionLegacy}, hdr...))
					return err
				})
				srv.Close()
			}
		})
	}
}

// BenchmarkExhaustRaftIdle: Raft connections that send the preface and
// then nothing, to a node whose raft.NetworkTransport runs.
func BenchmarkExhaustRaftIdle(b *testing.B) {
	for _, sources := range exhaustSources {
		b.Run(fmt.Sprintf("conns=2000/sources=%d", sources), func(b *testing.B) {
			for range b.N {
				srv := startTransport(b, testConfig(nil), nil)
				srv.RaftTransport()
				exhaust(b, srv, 2000, sources, func(c net.Conn) error {
					_, err := c.Write([]byte{protoRaft, versionLegacy})
					return err
				})
				srv.Close()
			}
		})
	}
}

// partialAppendEntries is the start of a msgpack AppendEntriesRequest whose
// one entry declares 16 MiB of Data.
func partialAppendEntries() []byte {
	b := []byte{0} // rpcAppendEntries
	b = append(b, 0x81, 0xa7)
	b = append(b, "Entries"...)
	b = append(b, 0x91, 0x81, 0xa4)
	b = append(b, "Data"...)
	b = append(b, 0xc6)
	return binary.BigEndian.AppendUint32(b, 16<<20)
}

// BenchmarkExhaustRaftPartial: Raft connections that send 4 MiB of a
// 16 MiB AppendEntries and then nothing.
func BenchmarkExhaustRaftPartial(b *testing.B) {
	for _, sources := range exhaustSources {
		b.Run(fmt.Sprintf("conns=100/sources=%d", sources), func(b *testing.B) {
			for range b.N {
				srv := startTransport(b, testConfig(nil), nil)
				srv.RaftTransport()
				chunk := make([]byte, 4<<20)
				exhaust(b, srv, 100, sources, func(c net.Conn) error {
					c.Write([]byte{protoRaft, versionLegacy})
					c.Write(partialAppendEntries())
					_, err := c.Write(chunk)
					return err
				})
				srv.Close()
			}
		})
	}
}

// BenchmarkExhaustRaftEntries: Raft connections that send an AppendEntries
// whose Entries declares 2^30 elements, followed by 1 MiB of empty maps
// (one byte each; raft allocates a Log per element), then nothing.
func BenchmarkExhaustRaftEntries(b *testing.B) {
	for _, sources := range exhaustSources {
		b.Run(fmt.Sprintf("conns=16/sources=%d", sources), func(b *testing.B) {
			for range b.N {
				srv := startTransport(b, testConfig(nil), nil)
				srv.RaftTransport()
				req := []byte{0, 0x81, 0xa7}
				req = append(req, "Entries"...)
				req = append(req, 0xdd)
				req = binary.BigEndian.AppendUint32(req, 1<<30)
				req = append(req, bytes.Repeat([]byte{0x80}, 1<<20)...)
				exhaust(b, srv, 16, sources, func(c net.Conn) error {
					c.Write([]byte{protoRaft, versionLegacy})
					_, err := c.Write(req)
					return err
				})
				srv.Close()
			}
		})
	}
}

// BenchmarkExhaustTLSStalled: connections to a TLS node that send the first
// byte of a TLS record and then nothing. It also reports how long the node
// took, after the connections were opened and measured, to close all of
// them (close-s).
func BenchmarkExhaustTLSStalled(b *testing.B) {
	ca := newTestCA(b, "ca")
	for _, sources := range exhaustSources {
		b.Run(fmt.Sprintf("conns=5000/sources=%d", sources), func(b *testing.B) {
			for range b.N {
				srv := startTransport(b, testConfig(ca.tlsConfig(b, "srv")), nil)
				conns := exhaust(b, srv, 5000, sources, func(c net.Conn) error {
					_, err := c.Write([]byte{tlsHandshakeRecord})
					return err
				})
				start := time.Now()
				for openConns(conns) > 0 && time.Since(start) < 30*time.Second {
				}
				b.ReportMetric(time.Since(start).Seconds(), "close-s")
				srv.Close()
			}
		})
	}
}
