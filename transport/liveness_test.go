package transport

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raftlock/raftlock/internal/testing/memnet"
)

// stepWallClock makes wallClock read the real (here: fake) clock shifted
// by *step, for the rest of the test.
func stepWallClock(t *testing.T) *atomic.Int64 {
	var step atomic.Int64
	wallClock = func() time.Time { return time.Now().Add(time.Duration(step.Load())).Round(0) }
	t.Cleanup(func() { wallClock = time.Now })
	return &step
}

// A wall clock jumping forward must not kill healthy RPC connections
// (issue 14 #7): a call in flight across the step completes.
func TestSynctestLivenessIgnoresForwardClockStep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		step := stepWallClock(t)
		n := memnet.New()
		defer n.Close()
		started, release := make(chan struct{}), make(chan struct{})
		srv := memTransport(t, n, "srv", HandlerFunc(func(ctx context.Context, _ string, _ []byte) ([]byte, error) {
			close(started)
			select {
			case <-release:
				return []byte("done"), nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}), nil)
		defer srv.Close()
		cli := memTransport(t, n, "cli", nil, nil)
		defer cli.Close()

		done := make(chan error, 1)
		go func() {
			_, err := cli.Call(context.Background(), srv.Addr(), nil)
			done <- err
		}()
		<-started
		step.Store(int64(time.Hour))
		time.Sleep(5 * defaultKeepaliveInterval)
		select {
		case err := <-done:
			t.Fatalf("call failed after a forward wall-clock step: %v", err)
		default:
		}
		close(release)
		if err := <-done; err != nil {
			t.Fatalf("call after a forward wall-clock step: %v", err)
		}
	})
}

// A wall clock jumping backward must not hide a dead connection: a call on
// a connection whose peer went silent fails within four keepalive
// intervals.
func TestSynctestLivenessIgnoresBackwardClockStep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		step := stepWallClock(t)
		n := memnet.New()
		defer n.Close()
		b := newBlocker()
		srv := memTransport(t, n, "srv", b.HandleRPC, nil)
		defer srv.Close()
		cli := memTransport(t, n, "cli", nil, nil)
		defer cli.Close()

		ctx, cancel := context.WithTimeout(context.Background(), 20*defaultKeepaliveInterval)
		defer cancel()
		done := make(chan error, 1)
		go func() {
			_, err := cli.Call(ctx, srv.Addr(), nil)
			done <- err
		}()
		<-b.started
		<-b.hasDL
		step.Store(-int64(time.Hour))
		n.Partition([]string{"cli"}, []string{"srv"})
		start := time.Now()
		err := <-done
		if !errors.Is(err, errConnectionLost) {
			t.Fatalf("call on a silent connection after a backward wall-clock step: %v, want errConnectionLost", err)
		}
		if got, max := time.Since(start), (deadAfter+1)*defaultKeepaliveInterval; got > max {
			t.Fatalf("dead connection detected after %v, want at most %v", got, max)
		}
		<-b.ended
	})
}
