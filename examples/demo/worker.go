//go:build unix

package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/raftlock/raftlock/fence"
	"github.com/raftlock/raftlock/lockapi"
)

// stats are the replica's counters, served on /demo/stats.
type stats struct {
	grants        atomic.Int64
	published     atomic.Int64
	rejected      atomic.Int64
	publishErrors atomic.Int64
	noQuorum      atomic.Int64 // acquisitions that failed for want of a quorum
	otherFailures atomic.Int64
	singletonTok  atomic.Uint64 // token of the running singleton job here, 0 if none
	singletonRuns atomic.Int64  // times the job started here
}

func (s *stats) add(c *atomic.Int64) { c.Add(1) }

// statsJSON is the answer of GET /demo/stats.
type statsJSON struct {
	Grants         int64  `json:"grants"`
	Published      int64  `json:"published"`
	Rejected       int64  `json:"rejected"`
	PublishErrors  int64  `json:"publish_errors"`
	NoQuorum       int64  `json:"no_quorum"`
	OtherFailures  int64  `json:"other_failures"`
	SingletonToken uint64 `json:"singleton_token"`
	SingletonRuns  int64  `json:"singleton_runs"`
	Workers        bool   `json:"workers"`
}

// workers are the replica's document workers: each takes a random
// document's lock, renders it, publishes it through the fence and unlocks.
type workers struct {
	c       *child
	mu      sync.Mutex
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	running bool
}

func (w *workers) start() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.running {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel, w.running = cancel, true
	for i := range w.c.spec.Workers {
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			w.c.work(ctx, i+1)
		}()
	}
}

// stop pauses the workers: each finishes (or abandons) its current document
// and returns; no lock is held by a worker afterwards.
func (w *workers) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.running {
		return
	}
	w.cancel()
	w.wg.Wait()
	w.running = false
}

func (w *workers) isRunning() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.running
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func between(lo, hi time.Duration) time.Duration { return lo + rand.N(hi-lo+1) }

// work is one worker's loop: the reference's document-publishing service,
// done right (fenced writes, the lease's context passed to the write).
func (c *child) work(ctx context.Context, id int) {
	for ctx.Err() == nil {
		gctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		sess, err := c.wsess.Get(gctx)
		cancel()
		if err != nil {
			c.countFailure(err)
			sleepCtx(ctx, between(200*time.Millisecond, 400*time.Millisecond))
			continue
		}
		doc := fmt.Sprintf("doc:%d", 1+rand.IntN(c.spec.Docs))
		lctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		lease, err := sess.Lock(lctx, doc)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				c.countFailure(err)
				sleepCtx(ctx, between(100*time.Millisecond, 300*time.Millisecond))
			}
			continue
		}
		c.rec.grant(doc, lease.Token(), "worker")
		c.stats.add(&c.stats.grants)
		// Render, then publish with the lease's token; stop if the lease is lost.
		select {
		case <-time.After(between(20*time.Millisecond, 60*time.Millisecond)):
			c.publish(lease.Context(), doc, lease.Token(), fmt.Sprintf("%s rendered by %s/worker-%d with token %d", doc, c.spec.ID, id, lease.Token()))
		case <-lease.Done():
		case <-ctx.Done():
		}
		uctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		lease.Unlock(uctx)
		cancel()
		sleepCtx(ctx, between(100*time.Millisecond, 250*time.Millisecond))
	}
}

func (c *child) countFailure(err error) {
	if errors.Is(err, lockapi.ErrNoQuorum) {
		c.stats.add(&c.stats.noQuorum)
	} else {
		c.stats.add(&c.stats.otherFailures)
	}
}

// singletonJob is the leader-style job: while it holds "job:report" it
// appends a row every 250 ms, fenced with its token.
func (c *child) singletonJob(ctx context.Context, l *lockapi.Lease) error {
	c.rec.grant(l.Name(), l.Token(), "singleton")
	c.stats.add(&c.stats.grants)
	c.stats.add(&c.stats.singletonRuns)
	c.stats.singletonTok.Store(uint64(l.Token()))
	defer c.stats.singletonTok.Store(0)
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-t.C:
		}
		err := c.fence.Exec(ctx, l.Name(), uint64(l.Token()), func(tx *sql.Tx) error {
			_, err := tx.Exec(c.spec.DB.q(`INSERT INTO singleton_runs (token, replica, at_ns) VALUES (?, ?, ?)`), int64(l.Token()), c.spec.ID, time.Now().UnixNano())
			return err
		})
		if errors.Is(err, fence.ErrStaleToken) {
			c.stats.add(&c.stats.rejected)
			return err // a newer runner exists: this lease is stale
		}
	}
}

// decodeBody decodes a demo control request (at most 64 KiB).
func decodeBody(r *http.Request, v any) error {
	return json.NewDecoder(io.LimitReader(r.Body, 64<<10)).Decode(v)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}
