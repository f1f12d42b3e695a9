package transport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestCallRoundTrip(t *testing.T) {
	ca := newTestCA(t, "ca")
	for _, tc := range []struct {
		name      string
		clientTLS bool
	}{
		{name: "plaintext"},
		{name: "mutual-TLS", clientTLS: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var sc, cc Config
			if tc.clientTLS {
				sc, cc = testConfig(ca.tlsConfig(t, "srv")), testConfig(ca.tlsConfig(t, "cli"))
			} else {
				sc, cc = testConfig(nil), testConfig(nil)
			}
			fromc := make(chan string, 1)
			srv := startTransport(t, sc, HandlerFunc(func(ctx context.Context, from string, req []byte) ([]byte, error) {
				fromc <- from
				return append([]byte("re:"), req...), nil
			}))
			cli := startTransport(t, cc, nil)
			resp, err := cli.Call(ctxTimeout(t), srv.Addr(), []byte("hello"))
			if err != nil {
				t.Fatal(err)
			}
			if string(resp) != "re:hello" {
				t.Fatalf("resp = %q", resp)
			}
			if from := <-fromc; !strings.HasPrefix(from, "127.0.0.1:") {
				t.Fatalf("handler saw from = %q", from)
			}
			if got := counterValue(t, cli.metrics.calls.WithLabelValues(outcomeOK)); got != 1 {
				t.Fatalf("ok calls metric = %v", got)
			}
			if got := counterValue(t, srv.metrics.accepted.WithLabelValues("rpc")); got != 1 {
				t.Fatalf("accepted rpc metric = %v", got)
			}
		})
	}
}

func TestCallEmptyPayloads(t *testing.T) {
	srv := startTransport(t, testConfig(nil), HandlerFunc(func(ctx context.Context, from string, req []byte) ([]byte, error) {
		if len(req) != 0 {
			return nil, fmt.Errorf("want empty request, got %q", req)
		}
		return nil, nil
	}))
	cli := startTransport(t, testConfig(nil), nil)
	resp, err := cli.Call(ctxTimeout(t), srv.Addr(), nil)
	if err != nil || len(resp) != 0 {
		t.Fatalf("Call = %q, %v", resp, err)
	}
}

func TestCallConcurrentMultiplexed(t *testing.T) {
	srv := startTransport(t, testConfig(nil), echo)
	cli := startTransport(t, testConfig(nil), nil)
	callEchoes(t, cli, srv.Addr(), 64, 40, func(g, i int) int { return g * i })
	// All of that went over the pooled connections, not one per call.
	cli.mu.Lock()
	n := 0
	for _, k := range cli.conns {
		if k.kind == connRPC {
			n++
		}
	}
	cli.mu.Unlock()
	if n < 1 || n > cli.cfg.RPCConnsPerPeer {
		t.Fatalf("client holds %d RPC connections, want 1..%d", n, cli.cfg.RPCConnsPerPeer)
	}
}

// blocker is a handler that reports when it starts and then waits for its
// context, reporting what it saw.
type blocker struct {
	started chan struct{}
	ended   chan error // ctx.Err() when the handler's ctx ended
	hasDL   chan bool
}

func newBlocker() *blocker {
	return &blocker{started: make(chan struct{}, 16), ended: make(chan error, 16), hasDL: make(chan bool, 16)}
}

func (b *blocker) HandleRPC(ctx context.Context, from string, req []byte) ([]byte, error) {
	_, ok := ctx.Deadline()
	b.hasDL <- ok
	b.started <- struct{}{}
	<-ctx.Done()
	b.ended <- ctx.Err()
	return nil, ctx.Err()
}

func TestCallDeadlineExceeded(t *testing.T) {
	b := newBlocker()
	srv := startTransport(t, testConfig(nil), b.HandleRPC)
	cli := startTransport(t, testConfig(nil), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := cli.Call(ctx, srv.Addr(), []byte("slow"))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Call err = %v, want DeadlineExceeded", err)
	}
	if !<-b.hasDL {
		t.Fatal("handler ctx had no deadline: not propagated")
	}
	if err := <-b.ended; err == nil {
		t.Fatal("handler ctx did not end")
	}
	if got := counterValue(t, cli.metrics.calls.WithLabelValues(outcomeDeadline)); got != 1 {
		t.Fatalf("deadline calls metric = %v", got)
	}
}

func TestCallCancelPropagates(t *testing.T) {
	b := newBlocker()
	srv := startTransport(t, testConfig(nil), b.HandleRPC)
	cli := startTransport(t, testConfig(nil), nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := cli.Call(ctx, srv.Addr(), []byte("wait"))
		done <- err
	}()
	<-b.started
	if <-b.hasDL {
		t.Fatal("handler ctx has a deadline though the caller set none")
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Call err = %v, want Canceled", err)
	}
	// The cancel frame reaches the server and cancels the handler.
	if err := <-b.ended; !errors.Is(err, context.Canceled) {
		t.Fatalf("handler ctx err = %v, want Canceled", err)
	}
	// The connection is still good for the next call.
	go func() { <-b.started }()
	ctx2, cancel2 := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel2()
	if _, err := cli.Call(ctx2, srv.Addr(), []byte("x")); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second call: %v", err)
	}
}

func TestCallAlreadyDoneContext(t *testing.T) {
	cli := startTransport(t, testConfig(nil), nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	// No dial happens: the address does not even exist.
	if _, err := cli.Call(ctx, "127.0.0.1:1", nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("Call = %v", err)
	}
}

func TestDeadlinePropagatedToHandler(t *testing.T) {
	dlc := make(chan time.Time, 1)
	srv := startTransport(t, testConfig(nil), HandlerFunc(func(ctx context.Context, from string, req []byte) ([]byte, error) {
		dl, _ := ctx.Deadline()
		dlc <- dl
		return nil, nil
	}))
	cli := startTransport(t, testConfig(nil), nil)
	want := time.Now().Add(time.Hour)
	ctx, cancel := context.WithDeadline(context.Background(), want)
	defer cancel()
	if _, err := cli.Call(ctx, srv.Addr(), nil); err != nil {
		t.Fatal(err)
	}
	got := <-dlc
	// The server computes it from the remaining time, so it can only be
	// later than the caller's by the (tiny) transit time, never earlier.
	if got.Before(want.Add(-time.Minute)) || got.After(want.Add(time.Minute)) {
		t.Fatalf("handler deadline %v, caller deadline %v", got, want)
	}
}

func TestRemoteErrors(t *testing.T) {
	srv := startTransport(t, testConfig(nil), HandlerFunc(func(ctx context.Context, from string, req []byte) ([]byte, error) {
		switch string(req) {
		case "fail":
			return nil, errors.New("lock table is full")
		case "panic":
			panic("boom")
		case "big":
			return make([]byte, 2048), nil
		}
		return []byte("ok"), nil
	}))
	cfg := testConfig(nil)
	srv.cfg.MaxMessageSize = 1024 // only affects responses the server sends
	cli := startTransport(t, cfg, nil)
	ctx := ctxTimeout(t)

	_, err := cli.Call(ctx, srv.Addr(), []byte("fail"))
	if !errors.Is(err, ErrRemote) || !strings.Contains(err.Error(), "lock table is full") {
		t.Fatalf("handler error: %v", err)
	}
	_, err = cli.Call(ctx, srv.Addr(), []byte("panic"))
	if !errors.Is(err, ErrRemote) || !strings.Contains(err.Error(), "panicked: boom") {
		t.Fatalf("handler panic: %v", err)
	}
	_, err = cli.Call(ctx, srv.Addr(), []byte("big"))
	if !errors.Is(err, ErrRemote) || !errors.Is(err, errTooLarge) {
		t.Fatalf("oversized response: %v", err)
	}
	// The server survived all of it on the same connection.
	if resp, err := cli.Call(ctx, srv.Addr(), []byte("hi")); err != nil || string(resp) != "ok" {
		t.Fatalf("after errors: %q, %v", resp, err)
	}
	if got := counterValue(t, cli.metrics.calls.WithLabelValues(outcomeRemote)); got != 3 {
		t.Fatalf("remote error calls metric = %v", got)
	}
	if got := counterValue(t, srv.metrics.served.WithLabelValues(outcomePanic)); got != 1 {
		t.Fatalf("panic metric = %v", got)
	}
}

func TestNoHandler(t *testing.T) {
	srv := startTransport(t, testConfig(nil), nil)
	cli := startTransport(t, testConfig(nil), nil)
	_, err := cli.Call(ctxTimeout(t), srv.Addr(), []byte("x"))
	if !errors.Is(err, ErrRemote) || !errors.Is(err, errNoHandler) {
		t.Fatalf("Call = %v", err)
	}
}

func TestRequestTooLarge(t *testing.T) {
	cfg := testConfig(nil)
	cfg.MaxMessageSize = 10
	cli := startTransport(t, cfg, nil)
	if _, err := cli.Call(ctxTimeout(t), "127.0.0.1:1", make([]byte, 11)); !errors.Is(err, errTooLarge) {
		t.Fatalf("Call = %v", err)
	}
}

func TestPeerRestartReconnect(t *testing.T) {
	srv := startTransport(t, testConfig(nil), echo)
	addr := srv.Addr()
	cli := startTransport(t, testConfig(nil), nil)
	ctx := ctxTimeout(t)
	if _, err := cli.Call(ctx, addr, []byte("1")); err != nil {
		t.Fatal(err)
	}
	srv.Close()

	// While the peer is down, calls fail (they do not hang).
	if _, err := cli.Call(ctx, addr, []byte("2")); err == nil {
		t.Fatal("call to a stopped peer succeeded")
	}

	cfg := testConfig(nil)
	cfg.BindAddr = addr
	startTransport(t, cfg, HandlerFunc(func(ctx context.Context, from string, req []byte) ([]byte, error) {
		return []byte("new"), nil
	}))
	// The stale pooled connection is replaced. At most one call may see the
	// old connection break (errConnectionLost) if it raced the peer's FIN.
	for attempt := 0; ; attempt++ {
		resp, err := cli.Call(ctx, addr, []byte("3"))
		if err == nil {
			if string(resp) != "new" {
				t.Fatalf("resp = %q", resp)
			}
			break
		}
		if !errors.Is(err, errConnectionLost) || attempt > 0 {
			t.Fatalf("call after restart (attempt %d): %v", attempt, err)
		}
	}
}

func TestServerCloseFailsInflightCalls(t *testing.T) {
	b := newBlocker()
	srv := startTransport(t, testConfig(nil), b.HandleRPC)
	cli := startTransport(t, testConfig(nil), nil)
	done := make(chan error, 1)
	go func() {
		_, err := cli.Call(ctxTimeout(t), srv.Addr(), nil)
		done <- err
	}()
	<-b.started
	srv.Close() // must not hang on the blocked handler: its ctx is cancelled
	if err := <-b.ended; !errors.Is(err, context.Canceled) {
		t.Fatalf("handler ctx = %v", err)
	}
	if err := <-done; !errors.Is(err, errConnectionLost) {
		t.Fatalf("in-flight call = %v, want errConnectionLost", err)
	}
}

func TestClientCloseFailsInflightCalls(t *testing.T) {
	b := newBlocker()
	srv := startTransport(t, testConfig(nil), b.HandleRPC)
	cli := startTransport(t, testConfig(nil), nil)
	done := make(chan error, 1)
	go func() {
		_, err := cli.Call(ctxTimeout(t), srv.Addr(), nil)
		done <- err
	}()
	<-b.started
	if err := cli.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, ErrClosed) {
		t.Fatalf("in-flight call = %v, want ErrClosed", err)
	}
	if _, err := cli.Call(ctxTimeout(t), srv.Addr(), nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("call after Close = %v", err)
	}
	if err := cli.Close(); err != nil {
		t.Fatalf("second Close = %v", err)
	}
	<-b.ended
}

func TestDialFailure(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cli := startTransport(t, testConfig(nil), nil)
	_, err = cli.Call(ctxTimeout(t), addr, nil)
	if err == nil || errors.Is(err, ErrRemote) || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Call to closed port = %v", err)
	}
	if got := counterValue(t, cli.metrics.calls.WithLabelValues(outcomeDial)); got != 1 {
		t.Fatalf("dial error metric = %v", got)
	}
}

// TestRepliesDirectAndQueuedKeepFrames: a reply is written by its handler
// when the connection's writer is idle and queued otherwise (writeReply);
// with many concurrent calls whose replies straddle maxDirect both
// paths run at once on each connection, and every caller must still get
// its own reply, whole.
func TestRepliesDirectAndQueuedKeepFrames(t *testing.T) {
	srv := startTransport(t, testConfig(nil), echo)
	cli := startTransport(t, testConfig(nil), nil)
	const calls = 30
	callEchoes(t, cli, srv.Addr(), 32, calls, func(g, i int) int {
		return (g*calls + i) % 7 * (maxDirect / 3) // 0 .. 2×maxDirect
	})
}

// callEchoes runs callers goroutines of calls calls each to the echo
// handler at addr, call i of caller g with a payload of size(g, i) bytes
// after its own tag, and fails t unless every caller gets its own echo.
func callEchoes(t *testing.T, cli *Transport, addr string, callers, calls int, size func(g, i int) int) {
	t.Helper()
	ctx := ctxTimeout(t)
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for g := range callers {
		wg.Go(func() {
			for i := range calls {
				req := fmt.Appendf(nil, "%d/%d/%s", g, i, bytes.Repeat([]byte{byte('a' + g%26)}, size(g, i)))
				resp, err := cli.Call(ctx, addr, req)
				if err != nil {
					errs <- err
					return
				}
				if want := append([]byte("echo:"), req...); !bytes.Equal(resp, want) {
					errs <- fmt.Errorf("caller %d call %d: %d-byte response %.40q, want %d bytes %.40q", g, i, len(resp), resp, len(want), want)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
