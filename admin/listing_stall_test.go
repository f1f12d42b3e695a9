package admin

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/lockinfo"
	"github.com/raftlock/raftlock/internal/replica"
	"github.com/raftlock/raftlock/internal/testing/clustertest"
	"github.com/raftlock/raftlock/node"
)

// TestMeasureListingStall is a measurement, not a test: it runs only with
// RAFTLOCK_MEASURE_LISTING=1 (go test -v -run TestMeasureListingStall
// -timeout 60m ./admin/) and prints its figures. Three nodes in one process
// over loopback TCP, LAN timing, quotas off; RAFTLOCK_MEASURE_LOCKS held
// locks (default 1,000,000) of RAFTLOCK_MEASURE_SESSIONS sessions (default
// 100,000, each holding locks/sessions of them). Then, in windows of
// RAFTLOCK_MEASURE_WINDOW (default 15s) each: 100 live sessions (TTL 4.5 s,
// renewed every 1.5 s through the three nodes in turn) and four workers
// locking and unlocking their own locks one operation at a time, while
// listing clients read the leader's admin API (over loopback HTTP) — none
// (the quiet run), one ten times a second, or four back to back — in
// RAFTLOCK_MEASURE_ROUNDS rounds (default 3) of every window in turn, so
// that a shared machine's background load falls on all of them alike. It
// reports per window the lock operations done and their p50, p99 and max
// latency, the listings done (and those not answered 200: a node that
// falls behind in applying answers 503) and how many of the 100 live
// sessions were lost (expired although renewed); then per kind of window
// the median of its rounds' p99, that median over the quiet one's, and the
// sessions lost in all rounds.
func TestMeasureListingStall(t *testing.T) {
	if os.Getenv("RAFTLOCK_MEASURE_LISTING") != "1" {
		t.Skip("a measurement: set RAFTLOCK_MEASURE_LISTING=1 to run it")
	}
	locks, sessions := envInt(t, "RAFTLOCK_MEASURE_LOCKS", 1_000_000), envInt(t, "RAFTLOCK_MEASURE_SESSIONS", 100_000)
	rounds := envInt(t, "RAFTLOCK_MEASURE_ROUNDS", 3)
	window := 15 * time.Second
	if v := os.Getenv("RAFTLOCK_MEASURE_WINDOW"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatal(err)
		}
		window = d
	}
	c := clustertest.Start(t, clustertest.Options{Nodes: 3, Timing: node.LANTiming(), Configure: func(_ int, cfg *node.Config) {
		cfg.Limits = fsm.Limits{MaxLockNameLen: fsmwire.MaxLockNameLen} // every other quota off
	}})
	defer c.Close()
	c.WaitReady(time.Minute)
	leader := c.Nodes[c.WaitLeader(time.Minute)]

	start := time.Now()
	owners := proposeAll(t, leader, sessions, func(int) fsm.Command { return fsm.OpenSession{TTL: fsmwire.MaxTTL, Description: "load"} })
	proposeAll(t, leader, locks, func(i int) fsm.Command {
		return fsm.Acquire{Session: owners[i%sessions].Session, Lock: fmt.Sprintf("load/%08d", i), Owner: randomOwner()}
	})
	t.Logf("loaded %d locks of %d sessions in %v", locks, sessions, time.Since(start).Round(time.Second))

	li := c.WaitLeader(time.Minute)
	leader = c.Nodes[li]
	api, err := New(Config{Node: leader, TTL: 10 * time.Second, Auth: Auth{Unauthenticated: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer api.Close(context.Background())
	srv := httptest.NewServer(api.Handler())
	defer srv.Close()
	// list reads path once and reports whether it answered 200 (a node
	// that falls behind applying answers 503 not_ready).
	list := func(path string) bool {
		resp, err := srv.Client().Get(srv.URL + path)
		if err != nil {
			t.Logf("GET %s: %v", path, err)
			return false
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}

	scenarios := []struct {
		name    string
		clients int
		every   time.Duration // 0: back to back
		path    string
	}{
		{"none (quiet)", 0, 0, ""},
		{"1 × GET /v1/locks?limit=1, 10/s", 1, 100 * time.Millisecond, "/v1/locks?limit=1"},
		{"1 × GET /v1/locks (1,000), 10/s", 1, 100 * time.Millisecond, "/v1/locks"},
		{"4 × GET /v1/locks?limit=1, back to back", 4, 0, "/v1/locks?limit=1"},
		{"4 × GET /v1/sessions?limit=1, back to back", 4, 0, "/v1/sessions?limit=1"},
		{"4 × GET /v1/locks (1,000), back to back", 4, 0, "/v1/locks"},
	}
	p99s := make([][]time.Duration, len(scenarios))
	lost := make([]int, len(scenarios))
	for round := range rounds {
		t.Logf("round %d: %-44s %6s %8s %8s %8s %9s %8s %8s", round+1, "listing clients", "ops", "p50", "p99", "max", "listings", "not 200", "lost")
		for i, sc := range scenarios {
			r := measureWindow(t, c, window, sc.clients, sc.every, func() bool { return list(sc.path) })
			t.Logf("round %d: %-44s %6d %8v %8v %8v %9d %8d %5d/100", round+1, sc.name, len(r.lat), pct(r.lat, 50), pct(r.lat, 99), pct(r.lat, 100), r.listings, r.refused, r.lost)
			p99s[i] = append(p99s[i], pct(r.lat, 99))
			lost[i] += r.lost
		}
	}
	t.Logf("%-44s %12s %10s %12s", "listing clients", "median p99", "× quiet", "lost")
	quiet := pct(p99s[0], 50)
	for i, sc := range scenarios {
		m := pct(p99s[i], 50)
		t.Logf("%-44s %12v %9.1f× %5d/%d", sc.name, m, float64(m)/float64(quiet), lost[i], 100*rounds)
	}
}

type windowResult struct {
	lat      []time.Duration // lock operations
	listings int64
	refused  int64 // listings not answered 200
	lost     int
}

// measureWindow runs one window: 100 live sessions renewed through every
// node, four lock workers, and the listing clients.
func measureWindow(t *testing.T, c *clustertest.Cluster, window time.Duration, clients int, every time.Duration, list func() bool) windowResult {
	const ttl = 4500 * time.Millisecond
	leader := c.Nodes[c.WaitLeader(time.Minute)]
	live := proposeAll(t, leader, 100, func(int) fsm.Command { return fsm.OpenSession{TTL: ttl, Description: "live"} })
	workers := proposeAll(t, leader, 4, func(int) fsm.Command { return fsm.OpenSession{TTL: fsmwire.MaxTTL, Description: "worker"} })
	ctx, cancel := context.WithTimeout(context.Background(), window)
	defer cancel()
	var wg sync.WaitGroup
	var expired atomic.Int64
	for i, s := range live {
		wg.Go(func() {
			for k := i; ; k++ {
				kctx, kcancel := context.WithTimeout(ctx, ttl/3)
				err := replica.Of(c.Nodes[k%len(c.Nodes)]).KeepAlive(kctx, s.Session)
				kcancel()
				if errors.Is(err, replica.ErrSessionExpired) {
					expired.Add(1)
					return
				}
				select {
				case <-ctx.Done():
					return
				case <-time.After(ttl / 3):
				}
			}
		})
	}
	var mu sync.Mutex
	var lat []time.Duration
	for i, w := range workers {
		wg.Go(func() {
			n := c.Nodes[i%len(c.Nodes)]
			name := "op/" + strconv.Itoa(i)
			for ctx.Err() == nil {
				o := randomOwner()
				for _, cmd := range []fsm.Command{fsm.Acquire{Session: w.Session, Lock: name, Owner: o}, fsm.Release{Session: w.Session, Lock: name, Owner: o}} {
					begin := time.Now()
					if _, err := replica.Of(n).Apply(ctx, cmd); err != nil {
						return // the window ended
					}
					mu.Lock()
					lat = append(lat, time.Since(begin))
					mu.Unlock()
				}
			}
		})
	}
	var listings, refused atomic.Int64
	for range clients {
		wg.Go(func() {
			for ctx.Err() == nil {
				if !list() {
					refused.Add(1)
				}
				listings.Add(1)
				if every > 0 {
					select {
					case <-ctx.Done():
					case <-time.After(every):
					}
				}
			}
		})
	}
	wg.Wait()
	// Sessions that lapsed are expired by the leader within a retry or two.
	sctx, scancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer scancel()
	time.Sleep(2 * time.Second)
	lost := 0
	leader = c.Nodes[c.WaitLeader(time.Minute)]
	if err := leader.Sync(sctx); err != nil {
		t.Fatalf("sync: %v", err)
	}
	for _, s := range live {
		if _, ok := leader.Session(s.Session); !ok {
			lost++
		} else {
			replica.Of(leader).Apply(sctx, fsm.CloseSession{Session: s.Session})
		}
	}
	for _, w := range workers {
		replica.Of(leader).Apply(sctx, fsm.CloseSession{Session: w.Session})
	}
	return windowResult{lat: lat, listings: listings.Load(), refused: refused.Load(), lost: max(lost, int(expired.Load()))}
}

// proposeAll applies cmd(i) for i in [0, count) from 256 goroutines on n.
func proposeAll(t *testing.T, n *node.Node, count int, cmd func(i int) fsm.Command) []fsm.Result {
	out := make([]fsm.Result, count)
	var next, failed atomic.Int64
	var wg sync.WaitGroup
	for range 256 {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < count; i = int(next.Add(1)) - 1 {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				r, err := replica.Of(n).Apply(ctx, cmd(i))
				cancel()
				if err != nil || (r.Status != fsmwire.StatusOK && r.Status != fsmwire.StatusGranted) {
					t.Errorf("propose %T: %v %v %s", cmd(i), r.Status, err, r.Reason)
					failed.Add(1)
					return
				}
				out[i] = r
			}
		})
	}
	wg.Wait()
	if failed.Load() > 0 {
		t.FailNow()
	}
	return out
}

func randomOwner() lockinfo.OwnerID {
	var o lockinfo.OwnerID
	rand.Read(o[:])
	return o
}

func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

// pct is the p-th percentile of d (100: the largest); 0 if empty.
func pct(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)].Round(100 * time.Microsecond)
}
