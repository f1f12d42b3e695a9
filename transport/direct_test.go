package transport

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raftlock/raftlock/internal/testing/memnet"
)

// A request is written on the caller's goroutine when the connection's
// writer is idle (direct.go). If the peer has stopped reading and the
// socket's buffer is full, that write blocks; the caller must still return
// when its ctx ends (not at the write deadline, 3 keepalive intervals
// later), and the connection, whose frame is half written, must fail, so
// that the calls waiting on it fail too and the next call dials afresh.
func TestSynctestDirectRequestCutByContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := memnet.NewWithBuffer(4096)
		defer n.Close()
		unblock := make(chan struct{})
		srv := memTransport(t, n, "srv", HandlerFunc(func(ctx context.Context, from string, req []byte) ([]byte, error) {
			if len(req) > 0 {
				select {
				case <-unblock:
				case <-ctx.Done():
				}
			}
			return req, nil
		}), func(c *Config) { c.MaxMessageSize = 1024 }) // handlers may hold 4 KiB of requests
		defer srv.Close()
		cli := memTransport(t, n, "cli", nil, func(c *Config) { c.RPCConnsPerPeer = 1 })
		defer cli.Close()
		if _, err := cli.Call(context.Background(), srv.Addr(), nil); err != nil {
			t.Fatal(err)
		}
		// Five held requests of 1000 bytes: four run, the fifth stops the
		// server's reader (backpressure), so nothing more is read.
		var wg sync.WaitGroup
		held := make(chan error, 5)
		for range 5 {
			wg.Go(func() {
				_, err := cli.Call(context.Background(), srv.Addr(), bytes.Repeat([]byte{'h'}, 1000))
				held <- err
			})
			synctest.Wait()
		}
		// 8000 bytes fill the 4 KiB buffer and block the direct write.
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		start := time.Now()
		_, err := cli.Call(ctx, srv.Addr(), bytes.Repeat([]byte{'b'}, 8000))
		if took := time.Since(start); took != time.Second || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("blocked call returned after %v with %v, want 1s and the deadline", took, err)
		}
		wg.Wait()
		close(held)
		for err := range held {
			if !errors.Is(err, errConnectionLost) {
				t.Errorf("a call held on the cut connection got %v, want errConnectionLost", err)
			}
		}
		close(unblock)
		if got, err := cli.Call(context.Background(), srv.Addr(), []byte("again")); err != nil || string(got) != "again" {
			t.Fatalf("call after the cut: %q, %v", got, err)
		}
	})
}
