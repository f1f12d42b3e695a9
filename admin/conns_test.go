package admin

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/raftlock/raftlock/internal/testing/clustertest"
)

// serveLoopback serves api on a loopback port until the test ends.
func serveLoopback(t *testing.T, api *Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := httpServer(api)
	go srv.Serve(ln)
	t.Cleanup(func() {
		srv.Close()
		closeAPI(t, api)
	})
	return ln.Addr().String()
}

// closedWithin reports whether the server closes conn within d (a read
// returns EOF or an error other than our own deadline).
func closedWithin(conn net.Conn, d time.Duration) bool {
	conn.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, conn)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return false
	}
	return true
}

// Clients that send a request body slowly, or keep an idle keep-alive
// connection, are cut off by the server's read and idle timeouts (before:
// only the header timeout, so both stayed open for ever).
func TestSlowAndIdleConnectionsAreClosed(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Nodes: 1})
	c.WaitReady(30 * time.Second)
	api := newAPI(t, c.Nodes[0], testLimits{readHeader: 200 * time.Millisecond, read: 300 * time.Millisecond, idle: 300 * time.Millisecond})
	addr := serveLoopback(t, api)

	const slow = 300
	conns := make([]net.Conn, 0, slow)
	defer func() {
		for _, conn := range conns {
			conn.Close()
		}
	}()
	for range slow {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, conn)
		fmt.Fprintf(conn, "POST /v1/acquire HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"lock\":")
	}
	// Bounded wait, not a timing assertion: the limit is 300 ms.
	open := 0
	deadline := time.Now().Add(10 * time.Second)
	for _, conn := range conns {
		if !closedWithin(conn, time.Until(deadline)) {
			open++
		}
	}
	if open > 0 {
		t.Errorf("%d of %d slow-body connections still open 10 s after they stalled (read timeout 300 ms)", open, slow)
	}

	idle, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	conns = append(conns, idle)
	fmt.Fprintf(idle, "GET /v1/status HTTP/1.1\r\nHost: x\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(idle), nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if !closedWithin(idle, 10*time.Second) {
		t.Errorf("idle keep-alive connection still open 10 s after its request (idle timeout 300 ms)")
	}
}

// A long poll outlives the server's read and write timeouts: its wait is
// added to them.
func TestLongPollOutlivesServerTimeouts(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Nodes: 1})
	c.WaitReady(30 * time.Second)
	api := newAPI(t, c.Nodes[0], testLimits{read: 200 * time.Millisecond, write: 200 * time.Millisecond})
	addr := serveLoopback(t, api)
	ctx := context.Background()
	hc := &http.Client{}
	defer hc.CloseIdleConnections()
	post := func(path, body string) (*http.Response, error) {
		req, _ := http.NewRequestWithContext(ctx, "POST", "http://"+addr+path, stringsReader(body))
		req.Header.Set("Content-Type", "application/json")
		return hc.Do(req)
	}
	first, err := post("/v1/acquire", `{"lock":"lp","wait":false,"ttl_ms":60000}`)
	if err != nil || first.StatusCode != http.StatusOK {
		t.Fatalf("first acquire: %v %v", first, err)
	}
	var got AcquireResponse
	decodeResp(t, first, &got)
	// The second waits for 1 s (longer than both timeouts) and times out
	// with a proper answer, not a cut connection.
	second, err := post("/v1/acquire", `{"lock":"lp","wait":true,"timeout_ms":1000}`)
	if err != nil {
		t.Fatalf("waiting acquire: connection cut: %v", err)
	}
	var e ErrorJSON
	decodeResp(t, second, &e)
	if second.StatusCode != http.StatusGatewayTimeout || e.Error != ErrKindTimeout {
		t.Errorf("waiting acquire: HTTP %d %+v, want 504 timeout", second.StatusCode, e)
	}
	if rel, err := post("/v1/release", `{"handle":"`+got.Handle+`"}`); err == nil {
		rel.Body.Close()
	}
}
