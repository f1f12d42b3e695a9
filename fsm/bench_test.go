package fsm

import (
	"bytes"
	"fmt"
	"io"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// encodeAll pre-encodes one entry per command (the leader's work, not timed).
func encodeAll(b *testing.B, cmds []Command) []*raft.Log {
	logs := make([]*raft.Log, len(cmds))
	for i, c := range cmds {
		data, err := EncodeEntry(Entry{At: epoch, Commands: []Command{c}})
		if err != nil {
			b.Fatal(err)
		}
		logs[i] = &raft.Log{Type: raft.LogCommand, Data: data}
	}
	return logs
}

func ownerN(i int) OwnerID {
	var o OwnerID
	o[0] = 1
	for j := 1; j < 9; j++ {
		o[j] = byte(i >> (8 * (j - 1)))
	}
	return o
}

// run applies the logs through the raft.FSM entry point (decode included).
func run(b *testing.B, f *FSM, logs []*raft.Log, next *uint64) {
	b.ReportAllocs()
	b.ResetTimer()
	for _, l := range logs {
		*next++
		l.Index = *next
		if r := f.Apply(l).(*Response); r.Err != nil || r.Results[0].Status == StatusInvalid {
			b.Fatalf("apply: %+v", r)
		}
	}
}

func BenchmarkApplyAcquire(b *testing.B) {
	h := newHarness(b)
	s := h.open(time.Minute, 0, "bench")
	cmds := make([]Command, b.N)
	for i := range cmds {
		cmds[i] = Acquire{Session: s, Lock: "invoice:" + strconv.Itoa(i), Owner: ownerN(i)}
	}
	run(b, h.f, encodeAll(b, cmds), &h.index)
}

func BenchmarkApplyRelease(b *testing.B) {
	h := newHarness(b)
	s := h.open(time.Minute, 0, "bench")
	cmds := make([]Command, b.N)
	for i := range cmds {
		name := "invoice:" + strconv.Itoa(i)
		h.do(Acquire{Session: s, Lock: name, Owner: ownerN(i)})
		cmds[i] = Release{Lock: name, Owner: ownerN(i)}
	}
	run(b, h.f, encodeAll(b, cmds), &h.index)
}

// BenchmarkApplyHandoff: release of a lock with a waiter, which is granted
// in the same command.
func BenchmarkApplyHandoff(b *testing.B) {
	h := newHarness(b)
	s := h.open(time.Minute, 0, "bench")
	cmds := make([]Command, b.N)
	h.do(Acquire{Session: s, Lock: "hot", Owner: ownerN(0)})
	for i := range cmds {
		h.do(Acquire{Session: s, Lock: "hot", Owner: ownerN(i + 1), Wait: true})
		cmds[i] = Release{Lock: "hot", Owner: ownerN(i)}
	}
	run(b, h.f, encodeAll(b, cmds), &h.index)
}

func BenchmarkApplyExpire(b *testing.B) {
	h := newHarness(b)
	cmds := make([]Command, b.N)
	for i := range cmds {
		s := h.open(time.Minute, time.Second, "bench")
		h.do(Acquire{Session: s, Lock: "invoice:" + strconv.Itoa(i), Owner: ownerN(i)})
		cmds[i] = ExpireSessions{Sessions: []SessionID{s}}
	}
	run(b, h.f, encodeAll(b, cmds), &h.index)
}

// populate applies n held locks, 1000 per entry, over n/10000+1 sessions.
func populate(tb tb, n int) *harness {
	h := newHarness(tb)
	h.f, h.rec = New(nil), nil // no recorder: it would keep every event
	var sess []SessionID
	for i := 0; i <= n/10000; i++ {
		sess = append(sess, h.open(time.Minute, 0, "bench-session-"+strconv.Itoa(i)))
	}
	batch := make([]Command, 0, 1000)
	for i := 0; i < n; i++ {
		batch = append(batch, Acquire{Session: sess[i%len(sess)], Lock: "invoice:" + strconv.Itoa(i), Owner: ownerN(i)})
		if len(batch) == cap(batch) || i == n-1 {
			h.entry(batch...)
			batch = batch[:0]
		}
	}
	return h
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkMemoryPerHeldLock reports the heap held per lock with 100k held
// locks (names "invoice:N", 11–14 bytes).
func BenchmarkMemoryPerHeldLock(b *testing.B) {
	const n = 100_000
	for i := 0; i < b.N; i++ {
		before := heapInUse()
		h := populate(b, n)
		after := heapInUse()
		b.ReportMetric(float64(after-before)/n, "B/lock")
		runtime.KeepAlive(h)
	}
}

type bufSink struct{ bytes.Buffer }

func (*bufSink) ID() string    { return "bench" }
func (*bufSink) Cancel() error { return nil }
func (*bufSink) Close() error  { return nil }

// BenchmarkSnapshotRestore: Snapshot (on the apply goroutine), Persist (in
// the background in Raft) and Restore of n held locks.
func BenchmarkSnapshotRestore(b *testing.B) {
	for _, n := range []int{100_000, 1_000_000} {
		b.Run(fmt.Sprintf("locks=%d", n), func(b *testing.B) {
			h := populate(b, n)
			b.ResetTimer()
			var snapT, persistT, restoreT time.Duration
			var size int
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				s, _ := h.f.Snapshot()
				t1 := time.Now()
				sink := &bufSink{}
				if err := s.Persist(sink); err != nil {
					b.Fatal(err)
				}
				t2 := time.Now()
				size = sink.Len()
				f := New(nil)
				if err := f.Restore(io.NopCloser(&sink.Buffer)); err != nil {
					b.Fatal(err)
				}
				t3 := time.Now()
				snapT += t1.Sub(t0)
				persistT += t2.Sub(t1)
				restoreT += t3.Sub(t2)
			}
			n := float64(b.N)
			b.ReportMetric(float64(snapT.Milliseconds())/n, "snapshot-ms")
			b.ReportMetric(float64(persistT.Milliseconds())/n, "persist-ms")
			b.ReportMetric(float64(restoreT.Milliseconds())/n, "restore-ms")
			b.ReportMetric(float64(size)/(1<<20), "MiB")
		})
	}
}

// BenchmarkApplyLockUnlock: the steady state of a lock service — acquire and
// release over a working set of 1,000 locks; one command per op.
func BenchmarkApplyLockUnlock(b *testing.B) {
	h := newHarness(b)
	h.f, h.rec = New(nil), nil
	s := h.open(time.Minute, 0, "bench")
	cmds := make([]Command, b.N)
	for i := range cmds {
		k := i / 2
		name := "invoice:" + strconv.Itoa(k%1000)
		if i%2 == 0 {
			cmds[i] = Acquire{Session: s, Lock: name, Owner: ownerN(k)}
		} else {
			cmds[i] = Release{Lock: name, Owner: ownerN(k)}
		}
	}
	run(b, h.f, encodeAll(b, cmds), &h.index)
}
