//go:build unix

package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/raftlock/raftlock/admin"
	"github.com/raftlock/raftlock/lockapi"
)

// The replica's demo control endpoints (next to the replica HTTP API that
// package admin serves). The parent process drives the story through them.

func (c *child) handleWorkers(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Run bool `json:"run"`
	}
	if err := decodeBody(r, &req); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		return
	}
	if req.Run {
		c.workers.start()
	} else {
		c.workers.stop()
	}
	writeJSON(w, http.StatusOK, map[string]bool{"running": c.workers.isRunning()})
}

// handleSingleton starts this replica's campaign for the singleton job.
func (c *child) handleSingleton(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	started := c.singleton
	c.singleton = true
	c.mu.Unlock()
	if !started {
		go c.runSingleton()
	}
	writeJSON(w, http.StatusOK, map[string]bool{"campaigning": true})
}

func (c *child) runSingleton() {
	ctx := c.ctx
	for ctx.Err() == nil {
		octx, cancel := context.WithTimeout(ctx, 5*time.Second)
		sess, err := lockapi.NewSession(octx, c.n, lockapi.WithTTL(c.spec.TTL), lockapi.WithOwner("singleton@"+c.spec.ID),
			lockapi.WithMetrics(c.metrics), lockapi.WithLogger(c.log))
		cancel()
		if err != nil {
			sleepCtx(ctx, 500*time.Millisecond)
			continue
		}
		// RunSingleton campaigns, runs the job while the lease is held, and
		// campaigns again (with a new session if needed) after a loss.
		err = lockapi.RunSingleton(ctx, sess, "job:report", c.singletonJob)
		cctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		sess.Close(cctx)
		cancel()
		if err != nil && ctx.Err() == nil {
			c.log.Warn("singleton stopped", "err", err)
		}
	}
}

// staleJob is the worker of step 2: it takes a document's lock, starts
// rendering, is frozen (SIGSTOP) by the parent past its lease, and when its
// render completes it publishes — with its old token and without checking
// its lease again, like the reference's stale holder.
type staleJob struct {
	doc    string
	lease  *lockapi.Lease
	finish chan struct{}
	done   chan staleResult
}

type staleResult struct {
	Doc               string `json:"doc"`
	Token             uint64 `json:"token"`
	Accepted          bool   `json:"accepted"`
	Highest           uint64 `json:"highest"`
	Error             string `json:"error,omitempty"`
	Rejected          bool   `json:"rejected"` // by the fence (stale token)
	LeaseValidAtWrite bool   `json:"lease_valid_at_write"`
	LeaseError        string `json:"lease_error,omitempty"`
}

func (c *child) handleStaleAcquire(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Doc string `json:"doc"`
	}
	if err := decodeBody(r, &req); err != nil || req.Doc == "" {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "want {\"doc\":...}"})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	longPoll(w, 10*time.Second)
	sess, err := c.wsess.Get(ctx)
	if err != nil {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": err.Error()})
		return
	}
	lease, err := sess.Lock(ctx, req.Doc)
	if err != nil {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": err.Error()})
		return
	}
	c.rec.grant(req.Doc, lease.Token(), "stale-holder")
	c.stats.add(&c.stats.grants)
	job := &staleJob{doc: req.Doc, lease: lease, finish: make(chan struct{}), done: make(chan staleResult, 1)}
	c.mu.Lock()
	c.stale[req.Doc] = job
	c.mu.Unlock()
	go c.runStale(job)
	writeJSON(w, http.StatusOK, map[string]any{"doc": req.Doc, "token": uint64(lease.Token()), "session": uint64(sess.ID()),
		"valid_until_unix_ms": sess.ValidUntil().UnixMilli()})
}

func (c *child) runStale(job *staleJob) {
	// "Rendering": it completes when the parent says so (right after the
	// process is resumed), or after a minute.
	select {
	case <-job.finish:
	case <-time.After(time.Minute):
	}
	res := staleResult{Doc: job.doc, Token: uint64(job.lease.Token())}
	if err := job.lease.Err(); err != nil {
		res.LeaseError = err.Error()
	} else {
		res.LeaseValidAtWrite = true
	}
	// The bug under test: no check of the lease, a context that is not the
	// lease's. Only the fence stands between this write and the newer one.
	err := c.publish(context.Background(), job.doc, job.lease.Token(), fmt.Sprintf("%s rendered by %s with token %d (STALE)", job.doc, c.spec.ID, job.lease.Token()))
	res.Accepted = err == nil
	res.Rejected = errors.Is(err, lockapi.ErrStaleToken)
	if err != nil {
		res.Error = err.Error()
	}
	res.Highest, _ = c.fence.Highest(context.Background(), job.doc)
	uctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	job.lease.Unlock(uctx)
	cancel()
	job.done <- res
}

func (c *child) handleStaleFinish(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Doc string `json:"doc"`
	}
	if err := decodeBody(r, &req); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		return
	}
	c.mu.Lock()
	job := c.stale[req.Doc]
	delete(c.stale, req.Doc)
	c.mu.Unlock()
	if job == nil {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "no stale job for " + req.Doc})
		return
	}
	close(job.finish)
	longPoll(w, 10*time.Second) // the stale write and its unlock
	select {
	case res := <-job.done:
		writeJSON(w, http.StatusOK, res)
	case <-r.Context().Done():
	}
}

// handlePublish is a worker of another replica processing the same document:
// it waits for the lock (FIFO), publishes through the fence and unlocks.
func (c *child) handlePublish(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Doc       string `json:"doc"`
		TimeoutMS int64  `json:"timeout_ms"`
	}
	if err := decodeBody(r, &req); err != nil || req.Doc == "" || req.TimeoutMS <= 0 {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "want {\"doc\":...,\"timeout_ms\":...}"})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), time.Duration(req.TimeoutMS)*time.Millisecond)
	defer cancel()
	longPoll(w, time.Duration(req.TimeoutMS)*time.Millisecond+5*time.Second) // the wait, then publish and unlock
	start := time.Now()
	lease, err := c.lockRetrying(ctx, req.Doc)
	if err != nil {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": err.Error()})
		return
	}
	waited := time.Since(start)
	c.rec.grant(req.Doc, lease.Token(), "takeover")
	c.stats.add(&c.stats.grants)
	err = c.publish(lease.Context(), req.Doc, lease.Token(), fmt.Sprintf("%s rendered by %s with token %d", req.Doc, c.spec.ID, lease.Token()))
	uctx, cancel2 := context.WithTimeout(context.Background(), 2*time.Second)
	lease.Unlock(uctx)
	cancel2()
	out := map[string]any{"doc": req.Doc, "token": uint64(lease.Token()), "waited_ms": waited.Milliseconds(), "accepted": err == nil}
	if err != nil {
		out["error"] = err.Error()
	}
	writeJSON(w, http.StatusOK, out)
}

// lockRetrying waits for the lock like a worker would: if its session is
// lost while it waits (the cluster lost its quorum for a moment: two
// replicas left while one is frozen, on a loaded machine), it queues again
// with a new session until ctx ends.
func (c *child) lockRetrying(ctx context.Context, doc string) (*lockapi.Lease, error) {
	for {
		sess, err := c.wsess.Get(ctx)
		if err != nil {
			return nil, err
		}
		lease, err := sess.Lock(ctx, doc)
		if err == nil || !errors.Is(err, lockapi.ErrSessionExpired) || ctx.Err() != nil {
			return lease, err
		}
		c.log.Warn("demo: the worker's session was lost while it waited; queueing again", "doc", doc, "err", err)
	}
}

// longPoll gives a demo handler that waits up to wait more time than the
// server's read and write timeouts (admin.Limits).
func longPoll(w http.ResponseWriter, wait time.Duration) {
	admin.LongPoll(w, wait, admin.DefaultLimits().WriteTimeout)
}

func (c *child) handleStats(w http.ResponseWriter, r *http.Request) {
	s := &c.stats
	writeJSON(w, http.StatusOK, statsJSON{
		Grants: s.grants.Load(), Published: s.published.Load(), Rejected: s.rejected.Load(),
		PublishErrors: s.publishErrors.Load(), NoQuorum: s.noQuorum.Load(), OtherFailures: s.otherFailures.Load(),
		SingletonToken: s.singletonTok.Load(), SingletonRuns: s.singletonRuns.Load(), Workers: c.workers.isRunning(),
	})
}
