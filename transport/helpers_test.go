package transport

import (
	"context"
	"crypto/tls"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// testLogger logs to stderr when RAFTLOCK_TEST_LOG is set, else discards.
func testLogger() *slog.Logger {
	if os.Getenv("RAFTLOCK_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// testConfig is a loopback config with a private metrics registry.
func testConfig(tlsCfg *tls.Config) Config {
	cfg := DefaultConfig()
	cfg.BindAddr = "127.0.0.1:0"
	cfg.TLS = tlsCfg
	cfg.Logger = testLogger()
	cfg.Registerer = prometheus.NewRegistry()
	return cfg
}

// startTransport starts a transport and closes it when the test ends.
func startTransport(t testing.TB, cfg Config, h HandlerFunc) *Transport {
	t.Helper()
	tr, err := New(cfg, h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

// echo answers every request with "echo:" + request.
var echo = HandlerFunc(func(ctx context.Context, from string, req []byte) ([]byte, error) {
	return append([]byte("echo:"), req...), nil
})

// counterValue reads a counter.
func counterValue(t testing.TB, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// rejected returns the number of handshakes rejected for reason.
func rejected(t testing.TB, tr *Transport, reason string) float64 {
	return counterValue(t, tr.metrics.rejected.WithLabelValues(reason))
}

// ctxTimeout is a context bounded generously: it only keeps a broken test
// from hanging; no assertion depends on it.
func ctxTimeout(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// watchRejects makes cfg report every refused connection's reason.
func watchRejects(cfg *Config) <-chan string {
	ch := make(chan string, 64)
	cfg.testHookReject = func(reason string) {
		select {
		case ch <- reason:
		default:
		}
	}
	return ch
}

// expectReject waits for the next refused connection and checks its reason
// and that it was counted.
func expectReject(t testing.TB, tr *Transport, rej <-chan string, reason string) {
	t.Helper()
	select {
	case got := <-rej:
		if got != reason {
			t.Fatalf("connection refused for %q, want %q", got, reason)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("no connection refused (want %q)", reason)
	}
	if rejected(t, tr, reason) < 1 {
		t.Fatalf("refusal %q not counted", reason)
	}
}

// raftAddr is tr's address as a raft.ServerAddress.
func raftAddr(tr *Transport) raft.ServerAddress { return raft.ServerAddress(tr.Addr()) }
