package chaos

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/lockinfo"
	"github.com/raftlock/raftlock/internal/replica"
	"github.com/raftlock/raftlock/internal/testing/clustertest"
	"github.com/raftlock/raftlock/internal/testing/memnet"
	"github.com/raftlock/raftlock/lockapi"
)

func own(n byte) lockinfo.OwnerID { return lockinfo.OwnerID{n, 0xC4} }

func grant(index uint64, lock string, o byte, tok lockinfo.Token, shared bool, permits int) fsm.Event {
	return fsm.Event{Kind: fsmwire.EventGranted, Index: index, Lock: lock, Owner: own(o), Token: tok, Shared: shared, Permits: permits}
}

func release(index uint64, lock string, o byte, tok lockinfo.Token) fsm.Event {
	return fsm.Event{Kind: fsmwire.EventReleased, Index: index, Lock: lock, Owner: own(o), Token: tok}
}

func wantChecks(t *testing.T, vs []Violation, checks ...string) {
	t.Helper()
	got := map[string]bool{}
	for _, v := range vs {
		got[v.Check] = true
	}
	if len(checks) == 0 && len(vs) > 0 {
		t.Fatalf("clean history flagged: %+v", vs)
	}
	for _, c := range checks {
		if !got[c] {
			t.Fatalf("want a %s violation, got %+v", c, vs)
		}
	}
}

// A clean log: readers together, a writer after them; a semaphore at its
// limit with a hand-off inside one entry (release first, then the grant).
func TestCheckPrimitivesLogClean(t *testing.T) {
	log := []fsm.Event{
		grant(1, "rw", 1, 1, true, 0), grant(2, "rw", 2, 2, true, 0),
		release(3, "rw", 1, 1), release(4, "rw", 2, 2), grant(4, "rw", 3, 3, false, 0),
		grant(5, "pool", 4, 4, false, 2), grant(6, "pool", 5, 5, false, 1),
		release(7, "pool", 4, 4), grant(7, "pool", 6, 6, false, 2),
	}
	wantChecks(t, CheckPrimitivesLog(log, map[string]int{"pool": 3}))
}

func TestCheckPrimitivesLogViolations(t *testing.T) {
	for name, c := range map[string]struct {
		log   []fsm.Event
		check string
	}{
		"over the limit":      {[]fsm.Event{grant(1, "pool", 1, 1, false, 2), grant(2, "pool", 2, 2, false, 2)}, CheckPermitsOverLimit},
		"reader during write": {[]fsm.Event{grant(1, "rw", 1, 1, false, 0), grant(2, "rw", 2, 2, true, 0)}, CheckReaderDuringWriter},
		"writer during read":  {[]fsm.Event{grant(1, "rw", 1, 1, true, 0), grant(2, "rw", 2, 2, false, 0)}, CheckReaderDuringWriter},
		"two writers":         {[]fsm.Event{grant(1, "rw", 1, 1, false, 0), grant(2, "rw", 2, 2, false, 0)}, CheckTwoWriters},
		"token order":         {[]fsm.Event{grant(1, "rw", 1, 5, true, 0), grant(2, "rw", 2, 4, true, 0)}, CheckPrimTokenOrder},
		"unmatched release":   {[]fsm.Event{grant(1, "rw", 1, 1, true, 0), release(2, "rw", 2, 1)}, CheckUnmatchedRelease},
		// The grant comes before the release within one entry: the entry
		// boundary is what counts, so this is clean...
		"hand-off order inside an entry is not a violation": {[]fsm.Event{grant(1, "pool", 1, 1, false, 3), grant(2, "pool", 2, 2, false, 1), release(2, "pool", 1, 1)}, ""},
	} {
		t.Run(name, func(t *testing.T) {
			vs := CheckPrimitivesLog(c.log, map[string]int{"pool": 3})
			if c.check == "" {
				wantChecks(t, vs)
				return
			}
			wantChecks(t, vs, c.check)
		})
	}
}

func TestCheckPrimitiveWindows(t *testing.T) {
	clean := []PrimWindow{
		{Client: 1, Lock: "rw", Token: 1, Shared: true, From: 0, To: 10},
		{Client: 2, Lock: "rw", Token: 2, Shared: true, From: 1, To: 12},
		{Client: 3, Lock: "rw", Token: 3, From: 12, To: 20}, // begins as the last read ends
		{Client: 1, Lock: "rw", Token: 4, Shared: true, From: 21},
		{Client: 1, Lock: "pool", Token: 5, Permits: 2, Limit: 3, From: 0, To: 10},
		{Client: 2, Lock: "pool", Token: 6, Permits: 1, Limit: 3, From: 2, To: 8},
		{Client: 3, Lock: "pool", Token: 7, Permits: 1, Limit: 3, From: 8, To: 9},
		{Client: 4, Lock: "pool", Token: 8, Permits: 9, Limit: 3, From: 5, To: 5}, // empty: lost before it returned
	}
	wantChecks(t, CheckPrimitiveWindows(clean))
	for name, c := range map[string]struct {
		ws    []PrimWindow
		check string
	}{
		"permits": {[]PrimWindow{{Lock: "pool", Token: 1, Permits: 2, Limit: 3, From: 0, To: 10}, {Lock: "pool", Token: 2, Permits: 2, Limit: 3, From: 9, To: 11}}, CheckPermitsOverLimit},
		"reader":  {[]PrimWindow{{Lock: "rw", Token: 1, From: 0, To: 10}, {Lock: "rw", Token: 2, Shared: true, From: 5, To: 11}}, CheckReaderDuringWriter},
		"writers": {[]PrimWindow{{Lock: "rw", Token: 1, From: 0, To: 10}, {Lock: "rw", Token: 2, From: 9}}, CheckTwoWriters},
		"tokens":  {[]PrimWindow{{Lock: "rw", Token: 5, Shared: true, From: 0, To: 1}, {Lock: "rw", Token: 4, From: 2, To: 3}}, CheckPrimTokenOrder},
	} {
		t.Run(name, func(t *testing.T) { wantChecks(t, CheckPrimitiveWindows(c.ws), c.check) })
	}
}

// TestPrimitivesUnderFaults runs semaphore and read-write workloads on a
// 3-node cluster (fake time) while the nemesis isolates one of the two
// other nodes at a time — leaders among them: sessions on the isolated
// node expire, leadership moves — and checks the log one replica applied
// (it is never cut off) and the clients' validity windows with the
// checkers above.
func TestPrimitivesUnderFaults(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := memnet.New()
		c := clustertest.Start(t, clustertest.Options{Nodes: 3, Net: net})
		c.WaitLeader(30 * time.Second)
		c.WaitReady(30 * time.Second)
		for c.Nodes[0].Status().ClusterVersion < fsm.MaxClusterVersion {
			time.Sleep(10 * time.Millisecond)
		}
		sub, err := replica.Of(c.Nodes[0]).Subscribe(replica.EventFilter{All: true}, 1<<16)
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Close()
		var events []fsm.Event
		resynced := false
		stopLog := make(chan struct{})
		logDone := make(chan struct{})
		go func() {
			defer close(logDone)
			for {
				select {
				case e := <-sub.C:
					events = append(events, e)
				case <-sub.Resync:
					resynced = true
				case <-stopLog:
					return
				}
			}
		}()

		ctx, cancel := context.WithCancel(context.Background())
		var mu sync.Mutex
		var windows []PrimWindow
		pool := lockapi.Semaphore{Name: "pool", Limit: 3}
		var wg sync.WaitGroup
		worker := func(id, ni int, acquire func(context.Context, *lockapi.Session) (*lockapi.Lease, error), limit int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(id), 17))
			var s *lockapi.Session
			defer func() {
				if s != nil {
					cctx, cc := context.WithTimeout(context.Background(), time.Second)
					s.Close(cctx)
					cc()
				}
			}()
			for ctx.Err() == nil {
				if s == nil || s.Err() != nil {
					if s != nil {
						cctx, cc := context.WithTimeout(context.Background(), time.Second)
						s.Close(cctx)
						cc()
					}
					sctx, sc := context.WithTimeout(ctx, 2*time.Second)
					var err error
					s, err = lockapi.NewSession(sctx, c.Nodes[ni], lockapi.WithTTL(time.Second))
					sc()
					if err != nil {
						s = nil
						time.Sleep(100 * time.Millisecond)
						continue
					}
				}
				actx, ac := context.WithTimeout(ctx, 2*time.Second)
				l, err := acquire(actx, s)
				ac()
				if err != nil {
					time.Sleep(20 * time.Millisecond)
					continue
				}
				w := PrimWindow{Client: id, Lock: l.Name(), Token: uint64(l.Token()), Shared: l.Shared(), Permits: l.Permits(), Limit: limit, From: time.Now().UnixNano()}
				select {
				case <-time.After(time.Duration(5+rng.IntN(40)) * time.Millisecond):
				case <-l.Done():
				}
				w.To = time.Now().UnixNano()
				mu.Lock()
				windows = append(windows, w)
				mu.Unlock()
				uctx, uc := context.WithTimeout(context.Background(), time.Second)
				l.Unlock(uctx)
				uc()
			}
		}
		id := 0
		for ni := range 3 {
			for range 2 {
				id++
				wg.Add(3)
				n := 1 + id%2
				go worker(id, ni, func(ctx context.Context, s *lockapi.Session) (*lockapi.Lease, error) { return s.Acquire(ctx, pool, n) }, pool.Limit)
				go worker(100+id, ni, func(ctx context.Context, s *lockapi.Session) (*lockapi.Lease, error) { return s.RLock(ctx, "rw") }, 0)
				if id <= 2 {
					go worker(200+id, ni, func(ctx context.Context, s *lockapi.Session) (*lockapi.Lease, error) { return s.Lock(ctx, "rw") }, 0)
				} else {
					wg.Done()
				}
			}
		}
		faults := 0
		for i := range 8 { // the nemesis: isolate n2 or n3 for 1.5 s, every 2.5 s
			time.Sleep(time.Second)
			c.Isolate(1 + i%2)
			faults++
			time.Sleep(1500 * time.Millisecond)
			c.Heal()
		}
		time.Sleep(2 * time.Second)
		cancel()
		wg.Wait()
		time.Sleep(time.Second) // the last releases reach the observing replica
		// Every worker has closed its session; one whose close failed
		// expires within its TTL (1 s). Then nothing may be left: a permit,
		// a read or write grant or a waiter still in the table belongs to a
		// session that is gone (a grant left dangling).
		time.Sleep(3 * time.Second)
		left, _ := c.Nodes[0].Locks("", "", 0) // the first page: every lock left is an error
		for _, li := range left {
			t.Errorf("end state: %s still has holder %v (held %v), %d shared grants (%d permits used), %d waiters",
				li.Name, li.Holder.Session, li.Held, li.SharedCount, li.Used, li.WaiterCount)
		}
		close(stopLog)
		<-logDone
		if resynced {
			t.Fatal("the observing replica dropped events: its log view is incomplete")
		}
		grants, expired := 0, 0
		for _, e := range events {
			switch {
			case e.Kind == fsmwire.EventGranted:
				grants++
			case e.Kind == fsmwire.EventSessionExpired:
				expired++
			}
		}
		if grants < 100 || len(windows) < 100 {
			t.Fatalf("too little happened: %d grants in the log, %d windows", grants, len(windows))
		}
		for _, v := range CheckPrimitivesLog(events, map[string]int{"pool": pool.Limit}) {
			t.Errorf("log: %s [%s] %s", v.Check, v.Lock, v.Detail)
		}
		for _, v := range CheckPrimitiveWindows(windows) {
			t.Errorf("windows: %s [%s] %s", v.Check, v.Lock, v.Detail)
		}
		t.Logf("%d faults, %d grants in the log, %d sessions expired, %d client windows", faults, grants, expired, len(windows))
	})
}
