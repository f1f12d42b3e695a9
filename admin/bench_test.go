package admin

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/lockinfo"
	"github.com/raftlock/raftlock/internal/replica"
	"github.com/raftlock/raftlock/internal/testing/clustertest"
	"github.com/raftlock/raftlock/node"
)

// queueWaiters puts w waiters, each of its own session, on lock name (held
// by one more session), proposing from 64 goroutines.
func queueWaiters(b *testing.B, n *node.Node, name string, w int) {
	ctx := context.Background()
	open := func() lockinfo.SessionID {
		r, err := replica.Of(n).Apply(ctx, fsm.OpenSession{TTL: fsmwire.MaxTTL, Description: "bench waiter"})
		if err != nil || r.Status != fsmwire.StatusOK {
			b.Fatalf("open session: %v %v", r.Status, err)
		}
		return r.Session
	}
	acquire := func(s lockinfo.SessionID) {
		var o lockinfo.OwnerID
		rand.Read(o[:])
		r, err := replica.Of(n).Apply(ctx, fsm.Acquire{Session: s, Lock: name, Owner: o, Wait: true})
		if err != nil || (r.Status != fsmwire.StatusGranted && r.Status != fsmwire.StatusQueued) {
			b.Errorf("acquire: %v %v", r.Status, err)
		}
	}
	acquire(open())
	var wg sync.WaitGroup
	next := make(chan struct{}, w)
	for range w {
		next <- struct{}{}
	}
	close(next)
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range next {
				acquire(open())
			}
		}()
	}
	wg.Wait()
}

// BenchmarkLockListing: GET /v1/locks/{name} of a lock with 5,000 and
// 20,000 waiters (each its own session), listing them all.
func BenchmarkLockListing(b *testing.B) {
	c := clustertest.Start(b, clustertest.Options{Nodes: 1, Configure: func(_ int, cfg *node.Config) {
		cfg.Limits.MaxWaitersPerLock = 50_000 // above the default quota of 10,000
	}})
	c.WaitReady(30 * time.Second)
	n := c.Nodes[0]
	api, err := New(Config{Node: n, TTL: time.Second, Limits: Limits{MaxListedWaiters: 20_000}})
	if err != nil {
		b.Fatal(err)
	}
	defer api.Close(context.Background())
	queued := 0
	for _, w := range []int{5_000, 20_000} {
		queueWaiters(b, n, "hot", w-queued)
		queued = w
		b.Run(fmt.Sprintf("waiters=%d", w), func(b *testing.B) {
			for b.Loop() {
				req := httptest.NewRequest("GET", fmt.Sprintf("/v1/locks/hot?waiters=%d", w), nil)
				rec := httptest.NewRecorder()
				api.Handler().ServeHTTP(rec, req)
				if rec.Code != http.StatusOK {
					b.Fatalf("HTTP %d %s", rec.Code, rec.Body)
				}
			}
		})
	}
}
