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

	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/lockinfo"
)

// The apply benchmarks run against a realistic table — baseHeld locks held
// by 11 sessions — and time one kind of command at a time, in windows of
// window commands: the setup a window needs (and the clean-up after it) runs
// with the timer stopped, so the table stays near its base size whatever
// b.N is. Commands go through the raft.FSM entry point, decode included.
const (
	baseHeld = 100_000
	window   = 10_000
)

// applyBench holds a populated state and applies pre-encoded entries.
type applyBench struct {
	b    *testing.B
	h    *harness
	sess []lockinfo.SessionID
	next int // counter for fresh lock names and owners
}

func newApplyBench(b *testing.B) *applyBench {
	h := populate(b, baseHeld)
	var sess []lockinfo.SessionID
	for _, si := range allSessions(h.f) {
		sess = append(sess, si.ID)
	}
	return &applyBench{b: b, h: h, sess: sess, next: baseHeld}
}

// apply applies one command per entry, outside the timer, and checks it.
func (ab *applyBench) setup(cmds ...Command) {
	for _, c := range cmds {
		if r := ab.h.do(c); r.Status == fsmwire.StatusInvalid {
			ab.b.Fatalf("setup %T: %+v", c, r)
		}
	}
}

// timed applies the commands, one entry each, with the timer running.
func (ab *applyBench) timed(cmds []Command) {
	logs := make([]*raft.Log, len(cmds))
	for i, c := range cmds {
		data, err := EncodeEntry(Entry{At: ab.h.now, Commands: []Command{c}})
		if err != nil {
			ab.b.Fatal(err)
		}
		ab.h.index++
		logs[i] = &raft.Log{Type: raft.LogCommand, Index: ab.h.index, Data: data}
	}
	ab.b.StartTimer()
	for _, l := range logs {
		if r := ab.h.f.Apply(l).(*Response); r.Err != nil || r.Results[0].Status == fsmwire.StatusInvalid {
			ab.b.Fatalf("apply: %+v", r)
		}
	}
	ab.b.StopTimer()
}

// run calls win(n) for windows covering b.N commands.
func (ab *applyBench) run(win func(n int)) {
	ab.b.ReportAllocs()
	ab.b.ResetTimer()
	ab.b.StopTimer()
	for done := 0; done < ab.b.N; done += window {
		win(min(window, ab.b.N-done))
	}
}

func (ab *applyBench) fresh() (string, lockinfo.OwnerID, lockinfo.SessionID) {
	ab.next++
	return "invoice:" + strconv.Itoa(ab.next), ownerN(ab.next), ab.sess[ab.next%len(ab.sess)]
}

func ownerN(i int) lockinfo.OwnerID {
	var o lockinfo.OwnerID
	o[0] = 1
	for j := 1; j < 9; j++ {
		o[j] = byte(i >> (8 * (j - 1)))
	}
	return o
}

// BenchmarkApplyAcquire: acquire of a free lock (a grant).
func BenchmarkApplyAcquire(b *testing.B) {
	ab := newApplyBench(b)
	ab.run(func(n int) {
		acq, rel := make([]Command, n), make([]Command, n)
		for i := range n {
			name, o, s := ab.fresh()
			acq[i], rel[i] = Acquire{Session: s, Lock: name, Owner: o}, Release{Lock: name, Owner: o}
		}
		ab.timed(acq)
		ab.setup(rel...)
	})
}

// BenchmarkApplyRelease: release of a held lock without waiters.
func BenchmarkApplyRelease(b *testing.B) {
	ab := newApplyBench(b)
	ab.run(func(n int) {
		rel := make([]Command, n)
		for i := range n {
			name, o, s := ab.fresh()
			ab.setup(Acquire{Session: s, Lock: name, Owner: o})
			rel[i] = Release{Lock: name, Owner: o}
		}
		ab.timed(rel)
	})
}

// BenchmarkApplyHandoff: release of a lock with a waiter, which is granted
// in the same command.
func BenchmarkApplyHandoff(b *testing.B) {
	ab := newApplyBench(b)
	ab.run(func(n int) {
		name, first, s := ab.fresh()
		ab.setup(Acquire{Session: s, Lock: name, Owner: first})
		rel := make([]Command, n)
		prev := first
		for i := range n {
			_, o, s := ab.fresh()
			ab.setup(Acquire{Session: s, Lock: name, Owner: o, Wait: true})
			rel[i], prev = Release{Lock: name, Owner: prev}, o
		}
		ab.timed(rel)
		ab.setup(Release{Lock: name, Owner: prev})
	})
}

// BenchmarkApplyExpire: expiry of a session holding one lock (with a
// lock-delay, so that the lock enters it).
func BenchmarkApplyExpire(b *testing.B) {
	ab := newApplyBench(b)
	ab.run(func(n int) {
		exp := make([]Command, n)
		for i := range n {
			s := ab.h.open(time.Minute, time.Second, "bench")
			name, o, _ := ab.fresh()
			ab.setup(Acquire{Session: s, Lock: name, Owner: o})
			exp[i] = ExpireSessions{Sessions: []lockinfo.SessionID{s}}
		}
		ab.timed(exp)
		ab.h.advance(time.Hour)
		ab.setup(Tick{}) // end the delays: the table returns to its base size
	})
}

// populate applies n held locks, 1000 per entry, over n/10000+1 sessions.
func populate(tb tb, n int) *harness {
	h := newHarness(tb)
	h.f, h.rec = New(nil), nil // no recorder: it would keep every event
	var sess []lockinfo.SessionID
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

// BenchmarkApplyLockUnlock: the steady state of a lock service on top of
// the base table — acquire and release taking turns over a working set of
// 1,000 locks; one command per op.
func BenchmarkApplyLockUnlock(b *testing.B) {
	ab := newApplyBench(b)
	s := ab.sess[0]
	ab.run(func(n int) {
		cmds := make([]Command, n)
		for i := range n {
			k := ab.next + i/2
			name := "hot:" + strconv.Itoa(k%1000)
			if i%2 == 0 {
				cmds[i] = Acquire{Session: s, Lock: name, Owner: ownerN(k)}
			} else {
				cmds[i] = Release{Lock: name, Owner: ownerN(k)}
			}
		}
		if n%2 == 1 { // keep windows balanced: an odd window ends with an acquire
			ab.timed(cmds)
			k := ab.next + (n-1)/2
			ab.setup(Release{Lock: "hot:" + strconv.Itoa(k%1000), Owner: ownerN(k)})
		} else {
			ab.timed(cmds)
		}
		ab.next += (n + 1) / 2
	})
}
