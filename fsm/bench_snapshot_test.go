package fsm

import (
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/raftlock/raftlock/internal/fsmwire"
)

// discardSink is a snapshot sink that keeps nothing.
type discardSink struct{ n int64 }

func (s *discardSink) Write(p []byte) (int, error) { s.n += int64(len(p)); return len(p), nil }
func (*discardSink) ID() string                    { return "discard" }
func (*discardSink) Cancel() error                 { return nil }
func (*discardSink) Close() error                  { return nil }

// BenchmarkApplyDuringPersist: what an apply waits for while Raft takes a
// snapshot of n held locks. Raft calls Snapshot on its apply goroutine
// (every apply waits for it: snapshot-us) and Persist on another. Here an
// apply goroutine, idle between entries as Raft's is, gets one Lock+Unlock
// pair every 500 µs; each pair's latency from its scheduled instant (or
// the previous pair's end) to applied is recorded, quiet (before the snapshot) and during the Persist: p99 and
// max in µs. With -cpu 1 the Persist and the applies share one processor,
// as on a busy 2-core machine.
func BenchmarkApplyDuringPersist(b *testing.B) {
	for _, n := range []int{100_000, 1_000_000} {
		b.Run(fmt.Sprintf("locks=%d", n), func(b *testing.B) {
			h := populate(b, n)
			wantStatus(b, "version", h.do(SetClusterVersion{Version: MaxClusterVersion}), fsmwire.StatusOK) // as a cluster runs
			sid := allSessions(h.f)[0].ID
			k := 0
			applyPair := func() {
				k++
				name := "probe:" + strconv.Itoa(k%16)
				for _, c := range []Command{Acquire{Session: sid, Lock: name, Owner: ownerN(n + k)}, Release{Lock: name, Owner: ownerN(n + k)}} {
					data, err := EncodeEntry(Entry{At: h.now, Commands: []Command{c}})
					if err != nil {
						panic(err)
					}
					h.index++
					if r := h.f.Apply(&raft.Log{Type: raft.LogCommand, Index: h.index, Data: data}).(*Response); r.Err != nil || (r.Results[0].Status != fsmwire.StatusGranted && r.Results[0].Status != fsmwire.StatusOK) {
						panic(fmt.Sprintf("apply: %+v", r))
					}
				}
			}
			// The apply goroutine: entries (their hand-off instants) in,
			// latencies out; nil asks for a snapshot, as Raft's does.
			work := make(chan *time.Time, 1024)
			lat := make(chan time.Duration, 1024)
			snaps := make(chan raft.FSMSnapshot)
			go func() {
				for t := range work {
					if t == nil {
						s, err := h.f.Snapshot()
						if err != nil {
							panic(err)
						}
						snaps <- s
						continue
					}
					applyPair()
					lat <- time.Since(*t)
				}
				close(lat)
			}()
			defer close(work)
			// feed hands over a pair every 500 µs of a fixed schedule, and
			// measures from the instant the schedule set or the previous
			// pair was applied, whichever is later (a stalled hand-off
			// counts as latency; a backlog is not counted twice).
			feed := func(until func() bool) []time.Duration {
				var out []time.Duration
				start, prev := time.Now(), time.Time{}
				for i := 0; !until(); i++ {
					due := start.Add(time.Duration(i) * 500 * time.Microsecond)
					time.Sleep(time.Until(due))
					if prev.After(due) {
						due = prev
					}
					work <- &due
					d := <-lat
					out = append(out, d)
					prev = due.Add(d)
				}
				return out
			}
			var quiet, during []time.Duration
			var snapT, persistT time.Duration
			b.ResetTimer()
			for range b.N {
				i := 0
				quiet = append(quiet, feed(func() bool { i++; return i > 1000 })...)
				t0 := time.Now()
				work <- nil
				s := <-snaps
				snapT += time.Since(t0)
				done := make(chan time.Duration, 1)
				go func() {
					t := time.Now()
					if err := s.Persist(&discardSink{}); err != nil {
						panic(err)
					}
					done <- time.Since(t)
				}()
				var d time.Duration
				during = append(during, feed(func() bool {
					select {
					case d = <-done:
						return true
					default:
						return false
					}
				})...)
				persistT += d
			}
			b.StopTimer()
			p := func(xs []time.Duration, q float64) float64 {
				if len(xs) == 0 {
					return 0
				}
				s := slices.Clone(xs)
				slices.Sort(s)
				return float64(s[min(len(s)-1, int(q*float64(len(s))))].Microseconds())
			}
			bn := float64(b.N)
			b.ReportMetric(float64(snapT.Microseconds())/bn, "snapshot-us")
			b.ReportMetric(float64(persistT.Milliseconds())/bn, "persist-ms")
			b.ReportMetric(p(quiet, 0.99), "quiet-p99-us")
			b.ReportMetric(p(during, 0.99), "persist-p99-us")
			b.ReportMetric(p(during, 1), "persist-max-us")
			b.ReportMetric(float64(len(during))/bn, "pairs-during")
		})
	}
}

// BenchmarkPersist: the encoding of a snapshot of n held locks (Raft's
// snapshot goroutine; CPU taken from everything else on the machine).
func BenchmarkPersist(b *testing.B) {
	for _, n := range []int{100_000, 1_000_000} {
		b.Run(fmt.Sprintf("locks=%d", n), func(b *testing.B) {
			h := populate(b, n)
			wantStatus(b, "version", h.do(SetClusterVersion{Version: MaxClusterVersion}), fsmwire.StatusOK) // as a cluster runs
			s, err := h.f.Snapshot()
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if err := s.Persist(&discardSink{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
