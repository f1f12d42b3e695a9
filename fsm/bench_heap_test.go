package fsm

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/lockinfo"
)

// BenchmarkHeapPer measures the live heap one more piece of state costs —
// a held lock (a name and a value of the largest size, or a short name
// without a value), a waiter in a long queue, a session — as heap B/item,
// next to what the state machine accounts for it (accounted B/item, the
// unit of Limits.MaxStateBytes). Each run adds perRun items to a fresh
// state machine without quotas and reads the heap before and after (after
// a GC both times). Run it once: go test -run '^$' -bench HeapPer -benchtime 1x ./fsm/
func BenchmarkHeapPer(b *testing.B) {
	const perRun = 20_000
	shapes := []struct {
		name string
		add  func(h *harness, sess []lockinfo.SessionID, i int) Command
	}{
		{"lock/largest", func(h *harness, sess []lockinfo.SessionID, i int) Command {
			return Acquire{Session: sess[i%len(sess)], Lock: fmt.Sprintf("%0*d", fsmwire.MaxLockNameLen, i), Owner: benchOwner(i), Value: strings.Repeat("v", fsmwire.MaxValueLen)}
		}},
		{"lock/short", func(h *harness, sess []lockinfo.SessionID, i int) Command {
			return Acquire{Session: sess[i%len(sess)], Lock: fmt.Sprintf("job:%06d", i), Owner: benchOwner(i)}
		}},
		{"waiter", func(h *harness, sess []lockinfo.SessionID, i int) Command {
			return Acquire{Session: sess[i%len(sess)], Lock: "contended", Owner: benchOwner(i), Wait: true}
		}},
		{"session", func(h *harness, sess []lockinfo.SessionID, i int) Command {
			return OpenSession{TTL: time.Minute, Description: fmt.Sprintf("replica-%d/worker-%d", i%3, i)}
		}},
	}
	for _, shape := range shapes {
		b.Run(shape.name, func(b *testing.B) {
			var heap, accounted float64
			for range b.N {
				h := newHarness(b)
				h.do(SetClusterVersion{Version: MaxClusterVersion})
				sess := make([]lockinfo.SessionID, 16)
				for i := range sess {
					sess[i] = h.open(time.Minute, 0, "bench")
				}
				h.do(Acquire{Session: sess[0], Lock: "contended", Owner: benchOwner(-1)})
				cmds := make([]Command, perRun)
				for i := range cmds {
					cmds[i] = shape.add(h, sess, i)
				}
				before, acc0 := heapNow(), h.f.accountedBytes()
				for i := 0; i < perRun; i += 1024 {
					for _, r := range h.entry(cmds[i:min(i+1024, perRun)]...) {
						if r.Status != fsmwire.StatusOK && r.Status != fsmwire.StatusGranted && r.Status != fsmwire.StatusQueued {
							b.Fatalf("%+v", r)
						}
					}
				}
				heap += float64(heapNow()-before) / perRun
				accounted += float64(h.f.accountedBytes()-acc0) / perRun
				runtime.KeepAlive(h)
				runtime.KeepAlive(cmds)
			}
			b.ReportMetric(heap/float64(b.N), "heap_B/item")
			b.ReportMetric(accounted/float64(b.N), "accounted_B/item")
		})
	}
}

func heapNow() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

func benchOwner(i int) lockinfo.OwnerID {
	var o lockinfo.OwnerID
	for k := range 8 {
		o[k] = byte(uint64(i+2) >> (8 * k))
	}
	o[15] = 0x5A
	return o
}

// accountedBytes is the state's accounted size (Limits.MaxStateBytes).
func (f *FSM) accountedBytes() int64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.st.total.bytes
}

// BenchmarkHeapAtTheBound fills a state machine whose only quota is
// Limits.MaxStateBytes = 64 MiB with held locks (of the longest name and
// value, or short ones) from 64 sessions until the bound refuses one, and
// reports how many it holds and the heap they take: the bound caps the
// heap at about itself. Run it once: go test -run '^$' -bench HeapAtTheBound -benchtime 1x ./fsm/
func BenchmarkHeapAtTheBound(b *testing.B) {
	const bound = 64 << 20
	for _, shape := range []struct {
		name        string
		lock, value func(i int) string
	}{
		{"largest", func(i int) string { return fmt.Sprintf("%0*d", fsmwire.MaxLockNameLen, i) }, func(int) string { return strings.Repeat("v", fsmwire.MaxValueLen) }},
		{"short", func(i int) string { return fmt.Sprintf("job:%06d", i) }, func(int) string { return "" }},
	} {
		b.Run(shape.name, func(b *testing.B) {
			for range b.N {
				h := newHarness(b)
				h.do(SetClusterVersion{Version: MaxClusterVersion})
				h.do(SetLimits{Limits: Limits{MaxStateBytes: bound}})
				before := heapNow()
				sess := make([]lockinfo.SessionID, 64)
				for i := range sess {
					sess[i] = h.open(time.Minute, 0, "bench")
				}
				held := 0
				for refused := false; !refused; {
					cmds := make([]Command, 1024)
					for i := range cmds {
						n := held + i
						cmds[i] = Acquire{Session: sess[n%len(sess)], Lock: shape.lock(n), Owner: benchOwner(n), Value: shape.value(n)}
					}
					for _, r := range h.entry(cmds...) {
						if r.Status == fsmwire.StatusQuota {
							refused = true
							break
						}
						held++
					}
				}
				heap := heapNow() - before
				b.ReportMetric(float64(held), "locks")
				b.ReportMetric(float64(heap)/(1<<20), "heap_MiB")
				b.ReportMetric(float64(h.f.accountedBytes())/(1<<20), "accounted_MiB")
				runtime.KeepAlive(h)
			}
		})
	}
}
