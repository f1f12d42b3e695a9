package lockapi

import (
	"context"
	"testing"
	"time"

	"github.com/raftlock/raftlock/internal/testing/clustertest"
	"github.com/raftlock/raftlock/internal/testing/memnet"
)

// testTTL is a session TTL for clusters with nodeopts.TestTiming (MinTTL 450 ms).
const testTTL = time.Second

// startCluster starts a 3-node in-memory cluster on memnet (call inside a
// synctest bubble) and waits until it is ready.
func startCluster(t *testing.T, opts clustertest.Options) *clustertest.Cluster {
	t.Helper()
	if opts.Net == nil {
		opts.Net = memnet.New()
	}
	c := clustertest.Start(t, opts)
	c.WaitLeader(10 * time.Second)
	c.WaitReady(10 * time.Second)
	return c
}

func newSession(t *testing.T, c *clustertest.Cluster, i int, opts ...SessionOption) *Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := NewSession(ctx, c.Nodes[i], append([]SessionOption{WithTTL(testTTL), WithOwner(clustertest.ID(i) + "/worker")}, opts...)...)
	if err != nil {
		t.Fatalf("session on %s: %v", clustertest.ID(i), err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Close(ctx)
	})
	return s
}

// flushBackground waits for the session's background releases (withdrawn
// waits, failed unlocks, stray acquisitions) to finish.
func (s *Session) flushBackground(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s.mu.Lock()
		n := 0
		for _, r := range s.releases {
			if !r.finished {
				n++
			}
		}
		s.mu.Unlock()
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d releases still in progress", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
