package lockapi

import (
	"context"
	"errors"
	"time"
)

// Job is the work of a singleton: it runs while its lease is held and must
// return promptly when ctx ends (the lease was lost, or RunSingleton's
// context ended). Use lease.Token() to fence what it writes.
type Job func(ctx context.Context, lease *Lease) error

// RunSingleton runs job on at most one replica at a time — leader-style
// singleton work such as a scheduler, a per-tenant report or a shard's
// consumer. It campaigns for lock name (FIFO, like any Lock), runs job with
// a context cancelled when the lease is lost, and after a loss campaigns
// again (opening a new session like s if s itself was lost). It returns nil
// when job returns nil (the work is done; the lock is released), and ctx's
// error when ctx ends. A job that returns an error is logged and run again
// after a pause of TTL/3, once the lock is re-acquired.
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
	if s == nil || job == nil {
		return invalid("nil session or job")
	}
	var cfg singletonConfig
	for _, o := range opts {
		o(&cfg)
	}
	stop, err := cfg.observe(ctx, s, name)
	if err != nil {
		return err
	}
	defer stop()
	cur := s
	defer func() {
		if cur != s {
			closeCtx, cancel := context.WithTimeout(context.Background(), s.tryTimeout())
			cur.Close(closeCtx)
			cancel()
		}
	}()
	pause := func() error {
		t := time.NewTimer(jitter(s.cfg.ttl / 3))
		defer t.Stop()
		select {
		case <-t.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		if cur.Err() != nil { // the session was lost: campaign with a fresh one
			next, err := openSession(ctx, s.n, cur.cfg)
			if err != nil {
				cur.log.Warn("singleton: cannot open a new session", "lock", name, "err", err)
				if err := pause(); err != nil {
					return err
				}
				continue
			}
			if cur != s {
				closeCtx, cancel := context.WithTimeout(ctx, s.tryTimeout())
				cur.Close(closeCtx)
				cancel()
			}
			cur = next
		}
		lease, err := cur.Lock(ctx, name)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if cur.Err() == nil && !errors.Is(err, ErrSessionExpired) {
				cur.log.Warn("singleton: campaign failed", "lock", name, "err", err)
				if err := pause(); err != nil {
					return err
				}
			}
			continue
		}
		cfg.started(lease)
		err = runJob(ctx, lease, job)
		cfg.stopped(lease, err)
		unlockCtx, cancel := context.WithTimeout(context.Background(), s.tryTimeout())
		lease.Unlock(unlockCtx)
		cancel()
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(lease.Err(), ErrLeaseLost):
			cur.log.Warn("singleton: lease lost; campaigning again", "lock", name, "token", uint64(lease.Token()), "cause", lease.Err())
		case err == nil:
			return nil
		default:
			cur.log.Warn("singleton: job failed; running it again", "lock", name, "err", err)
			if err := pause(); err != nil {
				return err
			}
		}
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
