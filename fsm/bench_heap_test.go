package fsm

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
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
		add  func(h *harness, sess []SessionID, i int) Command
	}{
		{"lock/largest", func(h *harness, sess []SessionID, i int) Command {
			return Acquire{Session: sess[i%len(sess)], Lock: fmt.Sprintf("%0*d", MaxLockNameLen, i), Owner: benchOwner(i), Value: strings.Repeat("v", MaxValueLen)}
		}},
		{"lock/short", func(h *harness, sess []SessionID, i int) Command {
			return Acquire{Session: sess[i%len(sess)], Lock: fmt.Sprintf("job:%06d", i), Owner: benchOwner(i)}
		}},
		{"waiter", func(h *harness, sess []SessionID, i int) Command {
			return Acquire{Session: sess[i%len(sess)], Lock: "contended", Owner: benchOwner(i), Wait: true}
		}},
		{"session", func(h *harness, sess []SessionID, i int) Command {
			return OpenSession{TTL: time.Minute, Description: fmt.Sprintf("replica-%d/worker-%d", i%3, i)}
		}},
	}
	for _, shape := range shapes {
		b.Run(shape.name, func(b *testing.B) {
			var heap, accounted float64
			for range b.N {
				h := newHarness(b)
				h.do(SetClusterVersion{Version: MaxClusterVersion})
				sess := make([]SessionID, 16)
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
						if r.Status != StatusOK && r.Status != StatusGranted && r.Status != StatusQueued {
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

func benchOwner(i int) OwnerID {
	var o OwnerID
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
