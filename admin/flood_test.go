package admin

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/raftlock/raftlock/internal/testing/clustertest"
)

// dialFrom opens a TCP connection to addr from a loopback source address
// (127.0.0.x: every one of them is this machine's on Linux).
func dialFrom(t *testing.T, src, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 10 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// waitUntil polls cond until it holds or 10 s pass (a bounded wait for the
// server's accept loop, not a timing assertion).
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within 10 s: %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// finish sends the rest of a request whose headers stalled and reads the
// answer's status.
func finish(t *testing.T, c net.Conn, br *bufio.Reader) int {
	t.Helper()
	fmt.Fprintf(c, "Host: 127.0.0.1\r\n\r\n")
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// The server keeps at most MaxConnsPerAddr connections of one source
// address and MaxConns in all open: a connection over a cap takes the
// place of an idle keep-alive one, or is closed at once (before: no cap).
func TestConnectionCaps(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Nodes: 1})
	c.WaitReady(30 * time.Second)
	api, err := New(Config{Node: c.Nodes[0], TTL: time.Second, Auth: Auth{Unauthenticated: true},
		Limits: Limits{MaxConns: 6, MaxConnsPerAddr: 3, ReadHeaderTimeout: time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	addr := serveLoopback(t, api)
	type conn struct {
		net.Conn
		br *bufio.Reader
	}
	// stalled opens a connection that sends half a request.
	stalled := func(src string) conn {
		nc := dialFrom(t, src, addr)
		fmt.Fprintf(nc, "GET /healthz HTTP/1.1\r\n")
		return conn{nc, bufio.NewReader(nc)}
	}
	tracked := func(src string, total, fromAddr int) {
		t.Helper()
		waitUntil(t, fmt.Sprintf("%d connections, %d from %s", total, fromAddr, src), func() bool {
			tt, fa := api.conns.open(src)
			return tt == total && fa == fromAddr
		})
	}
	var kept []conn
	for i := range 3 {
		kept = append(kept, stalled("127.0.0.1"))
		tracked("127.0.0.1", i+1, i+1)
	}
	if over := stalled("127.0.0.1"); !closedWithin(over, 10*time.Second) {
		t.Errorf("a 4th connection of one address (cap 3) stayed open")
	}
	for i := range 3 {
		kept = append(kept, stalled("127.0.0.2"))
		tracked("127.0.0.2", 4+i, i+1)
	}
	if over := stalled("127.0.0.3"); !closedWithin(over, 10*time.Second) {
		t.Errorf("a 7th connection (cap 6, none idle) stayed open")
	}
	// One of 127.0.0.2's connections finishes its request and idles: the
	// next new connection takes its place.
	if code := finish(t, kept[3], kept[3].br); code != http.StatusOK {
		t.Fatalf("finished request: HTTP %d", code)
	}
	waitUntil(t, "the finished connection to idle", func() bool {
		api.conns.mu.Lock()
		defer api.conns.mu.Unlock()
		return len(api.conns.idle) == 1
	})
	newcomer := stalled("127.0.0.3")
	tracked("127.0.0.3", 6, 1)
	if !closedWithin(kept[3], 10*time.Second) {
		t.Errorf("the idle connection was not closed to make room")
	}
	for i, k := range append(kept[:3], append(kept[4:], newcomer)...) {
		if code := finish(t, k, k.br); code != http.StatusOK {
			t.Errorf("admitted connection %d: HTTP %d", i, code)
		}
	}
}

// pollFlood is the review's attack: one client address opens attackers
// connections, each a lease wait asking an hour. It reports how many
// connections the server still holds waiting once it settled, the
// server-side goroutines and heap+stack bytes they cost, and how the others
// were answered.
type pollFlood struct {
	open, refused429, closed, other int
	goroutines                      int
	memBytes                        int64
}

func runPollFlood(t *testing.T, addr, handle string, attackers int) pollFlood {
	t.Helper()
	var f pollFlood
	settled := func() (int, int64) {
		// Stable goroutine count for 500 ms: the server took in every
		// connection it will (a bounded wait).
		prev, still := -1, 0
		for range 600 {
			runtime.GC()
			n := runtime.NumGoroutine()
			if n == prev {
				still++
			} else {
				still = 0
			}
			if still == 10 {
				break
			}
			prev = n
			time.Sleep(50 * time.Millisecond)
		}
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return runtime.NumGoroutine(), int64(ms.HeapInuse + ms.StackInuse)
	}
	g0, m0 := settled()
	req := fmt.Sprintf("GET /v1/lease/wait?handle=%s&timeout_ms=3600000 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", handle)
	conns := make([]net.Conn, 0, attackers)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range attackers {
		c, err := net.DialTimeout("tcp", addr, 10*time.Second)
		if err != nil {
			f.closed++
			continue
		}
		conns = append(conns, c)
		io.WriteString(c, req) // a refused connection may be gone already
	}
	g1, m1 := settled()
	f.goroutines, f.memBytes = g1-g0, m1-m0
	// Classify every connection: an answer, a close, or still waiting after
	// 2 s more.
	deadline := time.Now().Add(2 * time.Second)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, c := range conns {
		c.SetReadDeadline(deadline)
		wg.Go(func() {
			line, err := bufio.NewReader(c).ReadString('\n')
			mu.Lock()
			defer mu.Unlock()
			var ne net.Error
			switch {
			case strings.HasPrefix(line, "HTTP/1.1 429"):
				f.refused429++
			case errors.As(err, &ne) && ne.Timeout():
				f.open++
			case err != nil:
				f.closed++
			default:
				f.other++
			}
		})
	}
	wg.Wait()
	return f
}

// The review's 2,000 hour-long lease waits from one address: with the
// default limits the server keeps MaxPollsPerClient of them waiting,
// answers others 429 and closes the rest at accept (MaxConnsPerAddr), so
// the goroutines and memory the attack costs are bounded by the caps, not
// by the attacker (before: all 2,000 stayed open, 4,020 goroutines).
func TestLongPollFloodIsBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("2,000 loopback connections")
	}
	c := clustertest.Start(t, clustertest.Options{Nodes: 1})
	c.WaitReady(30 * time.Second)
	// A TTL that a loaded machine keeps: a lost lease would end the waits.
	api, err := New(Config{Node: c.Nodes[0], TTL: 30 * time.Second, Auth: Auth{Unauthenticated: true}})
	if err != nil {
		t.Fatal(err)
	}
	addr := serveLoopback(t, api)
	hc := &http.Client{}
	defer hc.CloseIdleConnections()
	req, _ := http.NewRequestWithContext(context.Background(), "POST", "http://"+addr+"/v1/acquire", strings.NewReader(`{"lock":"flood","wait":false}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("acquire: %v %v", resp, err)
	}
	var lease AcquireResponse
	decodeResp(t, resp, &lease)
	hc.CloseIdleConnections()

	defer func() { // before the server's Close, which would wait out the lease's window
		req, _ := http.NewRequest("POST", "http://"+addr+"/v1/release", strings.NewReader(`{"handle":"`+lease.Handle+`"}`))
		req.Header.Set("Content-Type", "application/json")
		if resp, err := hc.Do(req); err == nil {
			resp.Body.Close()
		}
		hc.CloseIdleConnections()
	}()

	const attackers = 2000
	f := runPollFlood(t, addr, lease.Handle, attackers)
	t.Logf("%d hour-long lease waits from one address: %d still waiting, %d answered 429, %d closed, %d other; server +%d goroutines, +%.1f MiB heap and stacks",
		attackers, f.open, f.refused429, f.closed, f.other, f.goroutines, float64(f.memBytes)/(1<<20))
	lim := DefaultLimits()
	if f.other > 0 {
		t.Errorf("%d lease waits answered otherwise (the lease ended?)", f.other)
	}
	if f.open == 0 || f.open > lim.MaxPollsPerClient {
		t.Errorf("%d lease waits still waiting, want 1..%d (MaxPollsPerClient)", f.open, lim.MaxPollsPerClient)
	}
	// Each connection the server keeps costs it at most two goroutines.
	if f.goroutines > 2*lim.MaxConnsPerAddr+50 {
		t.Errorf("the flood cost %d goroutines, want at most %d (MaxConnsPerAddr %d)", f.goroutines, 2*lim.MaxConnsPerAddr+50, lim.MaxConnsPerAddr)
	}
}
