package fsm

import (
	"fmt"
	"testing"
	"time"

	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/lockinfo"
)

// queueSizes are the queue lengths of the linear-cost benchmarks (issue 20
// #2). With the queue scanned once per session, expiring every session of a
// 50,000-waiter queue took 13.3 s.
var queueSizes = []int{5_000, 20_000, 50_000, 200_000}

// longQueue builds one lock held by one session, with n waiters of n other
// sessions (one each), and returns the waiters' sessions.
func longQueue(tb tb, n int) (*harness, []lockinfo.SessionID) {
	h := newHarness(tb)
	h.f, h.rec = New(nil), nil
	holder := h.open(time.Minute, 0, "holder")
	h.do(Acquire{Session: holder, Lock: "hot", Owner: ownerN(0)})
	sess := make([]lockinfo.SessionID, 0, n)
	var batch []Command
	flush := func() {
		if len(batch) > 0 {
			for _, r := range h.entry(batch...) {
				if r.Session != 0 && r.Status == fsmwire.StatusOK {
					sess = append(sess, r.Session)
				}
			}
			batch = batch[:0]
		}
	}
	for i := 0; i < n; i++ {
		batch = append(batch, OpenSession{TTL: time.Minute, Description: "waiter"})
		if len(batch) == 4096 {
			flush()
		}
	}
	flush()
	for i, s := range sess {
		batch = append(batch, Acquire{Session: s, Lock: "hot", Owner: ownerN(i + 1), Wait: true})
		if len(batch) == 4096 {
			flush()
		}
	}
	flush()
	if st := h.f.Stats(); st.Waiters != n {
		tb.Fatalf("%d waiters, want %d", st.Waiters, n)
	}
	return h, sess
}

// BenchmarkExpireLongQueue: every waiter's session of one long queue
// expires in one entry (as the leader proposes when they all go silent).
func BenchmarkExpireLongQueue(b *testing.B) {
	for _, n := range queueSizes {
		b.Run(fmt.Sprintf("waiters=%d", n), func(b *testing.B) {
			for range b.N {
				b.StopTimer()
				h, sess := longQueue(b, n)
				var cmds []Command
				for len(sess) > 0 {
					k := min(len(sess), fsmwire.MaxExpireSessions)
					cmds = append(cmds, ExpireSessions{Sessions: sess[:k]})
					sess = sess[k:]
				}
				data, err := EncodeEntry(Entry{At: h.now, Commands: cmds})
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				resp := h.f.applyEntry(h.index+1, data)
				b.StopTimer()
				if resp.Err != nil || h.f.Stats().Waiters != 0 {
					b.Fatalf("expire: %v, %+v", resp.Err, h.f.Stats())
				}
			}
		})
	}
}

// BenchmarkSessionsLongQueue: every page of FSM.Sessions (what the
// previous leader's takeover read at once, under the keepalive mutex) with
// one long queue.
func BenchmarkSessionsLongQueue(b *testing.B) {
	for _, n := range queueSizes {
		b.Run(fmt.Sprintf("waiters=%d", n), func(b *testing.B) {
			h, _ := longQueue(b, n)
			b.ResetTimer()
			for range b.N {
				if got := len(allSessions(h.f)); got != n+1 {
					b.Fatalf("%d sessions", got)
				}
			}
		})
	}
}

// BenchmarkSessionTTLsLongQueue: every page of FSM.SessionTTLs — what a
// new leader's takeover reads now — with one long queue.
func BenchmarkSessionTTLsLongQueue(b *testing.B) {
	for _, n := range queueSizes {
		b.Run(fmt.Sprintf("waiters=%d", n), func(b *testing.B) {
			h, _ := longQueue(b, n)
			b.ResetTimer()
			for range b.N {
				got := 0
				for after, more := lockinfo.SessionID(0), true; more; {
					var page []SessionTTL
					page, more = h.f.SessionTTLs(after, 0)
					got += len(page)
					if more {
						after = page[len(page)-1].ID
					}
				}
				if got != n+1 {
					b.Fatalf("%d sessions", got)
				}
			}
		})
	}
}
