package lockapi

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/raftlock/raftlock/node"
)

// Job is the work of a singleton: it runs while its lease is held and must
// return promptly when ctx ends (the lease was lost, or RunSingleton's
// context ended). Use lease.Token() to fence what it writes.
type Job func(ctx context.Context, lease *Lease) error

// RunSingleton runs job on at most one replica at a time — leader-style
// singleton work such as a scheduler, a per-tenant report or a shard's
// consumer. It campaigns for lock name (FIFO, like any Lock), runs job with
// a context cancelled when the lease is lost, and after a loss campaigns
// again (opening a new session like s if s itself was lost). A job that
// returns an error is logged and run again after a pause of TTL/3, once the
// lock is re-acquired.
//
// It returns
//   - nil when job returns nil: the work is done and the lock is released
//     (if the release cannot commit at once, RunSingleton waits for the
//     session's retries, or for the session's end, which releases it too);
//   - ctx's error when ctx ends;
//   - an error wrapping ErrSessionClosed when s is closed (also while it
//     runs on a replacement of s, which it then closes);
//   - an error wrapping ErrClosed when the node is closed (or
//     node.ErrHalted when its state machine halted);
//   - ErrInvalidArgument at once for a nil ctx, session or job, or a bad
//     lock name.
//
// Between runs it never campaigns while its previous grant is still held:
// it waits until that release committed, so it never queues behind itself.
//
// Successive runs across the cluster hold strictly increasing fencing
// tokens, so a resource fenced with them never accepts a write from a runner
// that was replaced.
//
// The lock is released only after the job's context has ended and the job
// has returned (never while it may still run, unlike client-go's
// ReleaseOnCancel, kubernetes/client-go#728). WithCallbacks adds
// client-go-style callbacks (started leading, stopped leading, new leader).
func RunSingleton(ctx context.Context, s *Session, name string, job Job, opts ...SingletonOption) error {
	switch {
	case ctx == nil:
		return invalid("nil context")
	case s == nil || job == nil:
		return invalid("nil session or job")
	}
	if err := validateNewLockName(name); err != nil {
		return fmt.Errorf("singleton: %w", err)
	}
	var cfg singletonConfig
	for _, o := range opts {
		o(&cfg)
	}
	// runCtx ends with ctx or when s is closed.
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(s.closing, func() { cancel(ErrSessionClosed) })
	defer stop()
	stopObserving, err := cfg.observe(runCtx, s, name)
	if err != nil {
		return err
	}
	defer stopObserving()
	r := &singleton{s: s, cur: s, name: name, job: job, ctx: ctx, run: runCtx, cfg: cfg}
	defer r.closeReplacement()
	return r.loop()
}

// singleton is one RunSingleton call.
type singleton struct {
	s    *Session // the caller's
	cur  *Session // s, or its replacement after s was lost
	name string
	job  Job
	ctx  context.Context // the caller's
	run  context.Context // ends with ctx or when s is closed
	cfg  singletonConfig // callbacks (singleton_callbacks.go)
}

func (r *singleton) loop() error {
	for {
		if err := r.stopped(); err != nil {
			return err
		}
		if err := r.cur.Err(); err != nil {
			if errors.Is(err, ErrSessionClosed) {
				return r.fail(err)
			}
			if err := r.replace(); err != nil {
				return err
			}
			continue
		}
		lease, err := r.cur.Lock(r.run, r.name)
		if err != nil {
			if err := r.stopped(); err != nil {
				return err
			}
			if errors.Is(err, node.ErrClosed) || errors.Is(err, node.ErrHalted) {
				return r.fail(err)
			}
			if r.cur.Err() == nil {
				r.cur.log.Warn("singleton: campaign failed", "lock", r.name, "err", err)
				if err := r.pause(); err != nil {
					return err
				}
			}
			continue
		}
		r.cfg.started(lease)
		err = runJob(r.run, lease, r.job)
		r.cfg.stopped(lease, err)
		r.release(lease)
		switch {
		case r.stopped() != nil:
			return r.stopped()
		case errors.Is(lease.Err(), ErrLeaseLost):
			r.cur.log.Warn("singleton: lease lost; campaigning again", "lock", r.name, "token", uint64(lease.Token()), "cause", lease.Err())
		case err == nil:
			return nil
		default:
			r.cur.log.Warn("singleton: job failed; running it again", "lock", r.name, "err", err)
			if err := r.pause(); err != nil {
				return err
			}
		}
	}
}

// release unlocks the lease after a run and waits until the release has
// committed (or the session ended, which releases it too), so that the next
// campaign does not queue behind this grant — unless run ends first (then
// the session's retries finish the release in the background).
func (r *singleton) release(lease *Lease) {
	unlockCtx, cancel := context.WithTimeout(context.Background(), r.s.tryTimeout())
	err := lease.Unlock(unlockCtx)
	cancel()
	if err == nil || r.run.Err() != nil {
		return
	}
	if errors.Is(err, ErrNoQuorum) {
		r.cur.log.Warn("singleton: release did not commit yet; waiting for it before going on", "lock", r.name, "err", err)
	}
	lease.waitReleased(r.run)
}

// replace opens a new session like s after the current one was lost.
func (r *singleton) replace() error {
	next, err := openSession(r.run, r.s.n, r.s.cfg)
	if err != nil {
		if err := r.stopped(); err != nil {
			return err
		}
		if errors.Is(err, node.ErrClosed) || errors.Is(err, node.ErrHalted) {
			return r.fail(err)
		}
		r.cur.log.Warn("singleton: cannot open a new session", "lock", r.name, "err", err)
		return r.pause()
	}
	r.closeReplacement()
	r.cur = next
	return nil
}

// closeReplacement closes the current session if RunSingleton opened it.
func (r *singleton) closeReplacement() {
	if r.cur != r.s {
		closeCtx, cancel := context.WithTimeout(context.Background(), r.s.tryTimeout())
		r.cur.Close(closeCtx)
		cancel()
	}
}

// stopped returns why RunSingleton must return now (ctx ended, s closed),
// or nil.
func (r *singleton) stopped() error {
	switch {
	case r.ctx.Err() != nil:
		return r.ctx.Err()
	case r.run.Err() != nil:
		return r.fail(context.Cause(r.run))
	}
	return nil
}

func (r *singleton) fail(err error) error {
	return fmt.Errorf("lockapi: singleton %q: %w", r.name, err)
}

// pause waits TTL/3 (jittered) before the next attempt.
func (r *singleton) pause() error {
	t := time.NewTimer(jitter(r.s.cfg.ttl / 3))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-r.run.Done():
		return r.stopped()
	}
}

func runJob(ctx context.Context, lease *Lease, job Job) error {
	m := lease.s.metrics
	m.singletonChanged()
	defer m.singletonChanged()
	jobCtx, cancel := context.WithCancelCause(lease.Context())
	stop := context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
	defer func() {
		stop()
		cancel(nil)
	}()
	lease.s.log.Info("singleton: running", "lock", lease.name, "token", uint64(lease.token))
	return job(jobCtx, lease)
}
