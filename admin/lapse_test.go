package admin

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raftlock/raftlock/node"
)

// newDelayAPI is newAPI with the HTTP sessions' lock-delay set.
func newDelayAPI(t *testing.T, n *node.Node, delay time.Duration) *Server {
	t.Helper()
	api, err := New(Config{Node: n, TTL: time.Second, LockDelay: delay, Auth: Auth{Unauthenticated: true}})
	if err != nil {
		t.Fatal(err)
	}
	return api
}

// The lock-delay of the server's HTTP sessions (Config.LockDelay) holds
// whoever notices that an HTTP client's lease lapsed: the server, when a
// client-kept lease is not asked about within its TTL, or when a graceful
// stop releases the leases whose reported windows have ended. The lock is
// granted to the next client no sooner than the delay after the window
// the server reported. Before, a client-kept lease's session had no
// lock-delay at all, and the server released a lapsed lease (Unlock,
// Close) at once.
func TestLapsedHTTPLeasesKeepTheLockDelay(t *testing.T) {
	const delay = 3 * time.Second
	t.Run("client-kept lease not asked about", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			c := startCluster(t, 3)
			api, other := newDelayAPI(t, c.Nodes[0], delay), newAPI(t, c.Nodes[1], testLimits{})
			defer closeAPI(t, api)
			defer closeAPI(t, other)
			_, end := acquireVia(t, api, "10.0.0.1:1", "kept", `,"ttl_ms":1000`)
			waiter := grantedAt(other, "10.0.0.2:1", "kept")
			at, ok := <-waiter
			if !ok {
				t.Fatal("the other client's acquire failed")
			}
			if gap := at.Sub(end); gap < delay {
				t.Errorf("granted %v after the window of the lapsed client-kept lease ended; the lock-delay is %v", gap, delay)
			}
		})
	})
	t.Run("graceful stop", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			c := startCluster(t, 3)
			stopping, other := newDelayAPI(t, c.Nodes[0], delay), newAPI(t, c.Nodes[1], testLimits{})
			defer closeAPI(t, other)
			_, sharedEnd := acquireVia(t, stopping, "10.0.0.1:1", "shared", "")
			_, keptEnd := acquireVia(t, stopping, "10.0.0.1:1", "kept", `,"ttl_ms":1500`)
			waiters := map[string]<-chan time.Time{
				"shared": grantedAt(other, "10.0.0.2:1", "shared"),
				"kept":   grantedAt(other, "10.0.0.2:1", "kept"),
			}
			ends := map[string]time.Time{"shared": sharedEnd, "kept": keptEnd}
			synctest.Wait()
			closed := make(chan error, 1)
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				closed <- stopping.Close(ctx)
			}()
			for lock, ch := range waiters {
				at, ok := <-ch
				if !ok {
					t.Fatalf("%s: the other replica's acquire failed", lock)
				}
				if gap := at.Sub(ends[lock]); gap < delay {
					t.Errorf("%s: granted %v after the window the stopping replica reported ended; the lock-delay is %v", lock, gap, delay)
				}
			}
			if err := <-closed; err != nil {
				t.Fatalf("close: %v", err)
			}
		})
	})
}

// An acquisition may set its client-kept lease's lock-delay (lock_delay_ms,
// what raftlock lock -lock-delay sends): a lapse of that lease holds the
// lock for that delay, on a server whose own lock-delay is 0. Out of range
// is refused and nothing is acquired.
func TestAcquireSetsItsLockDelay(t *testing.T) {
	const delay = 4 * time.Second
	synctest.Test(t, func(t *testing.T) {
		c := startCluster(t, 3)
		api, other := newAPI(t, c.Nodes[0], testLimits{}), newAPI(t, c.Nodes[1], testLimits{})
		defer closeAPI(t, api)
		defer closeAPI(t, other)
		for _, bad := range []string{`,"lock_delay_ms":-1`, `,"lock_delay_ms":3600001`} {
			if a := serve(api, "10.0.0.1:1", "POST", "/v1/acquire", `{"lock":"kept"`+bad+`}`); a.code != http.StatusBadRequest || !strings.Contains(a.body.Detail, "lock_delay_ms") {
				t.Errorf("%s: HTTP %d %s, want 400 naming lock_delay_ms", bad, a.code, a.raw)
			}
		}
		_, end := acquireVia(t, api, "10.0.0.1:1", "kept", `,"lock_delay_ms":4000`)
		at, ok := <-grantedAt(other, "10.0.0.2:1", "kept")
		if !ok {
			t.Fatal("the other client's acquire failed")
		}
		if gap := at.Sub(end); gap < delay {
			t.Errorf("granted %v after the window of the lapsed lease ended; its lock-delay is %v", gap, delay)
		}
	})
}
