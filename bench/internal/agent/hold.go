package agent

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/raftlock/raftlock/bench/internal/lockservice"
)

// holdAttempts bounds the tries of one acquisition in Hold.
const holdAttempts = 3

// Hold makes every pool session acquire args.PerSession distinct locks and
// keeps them (until CloseSessions or the next OpenSessions).
func (a *Agent) Hold(args HoldArgs, reply *HoldReply) error {
	if _, err := a.started(); err != nil {
		return err
	}
	a.mu.Lock()
	pool := a.pool
	a.mu.Unlock()
	var (
		mu    sync.Mutex
		held  []lockservice.Lease
		errs  Errors
		total = len(pool) * args.PerSession
		start = time.Now()
	)
	forEach(a.ctx, total, args.Concurrency, func(ctx context.Context, i int) error {
		j, k := i/args.PerSession, i%args.PerSession
		name := fmt.Sprintf("%s/%d/%d/%d", args.Prefix, a.index, j, k)
		var err error
		for range holdAttempts {
			var l lockservice.Lease
			l, err = a.lockOnce(ctx, pool[j], name, args.OpTimeout)
			if err == nil {
				mu.Lock()
				held = append(held, l)
				mu.Unlock()
				return nil
			}
		}
		mu.Lock()
		errs.add(err)
		mu.Unlock()
		return err
	})
	reply.Elapsed = time.Since(start)
	a.mu.Lock()
	a.held = append(a.held, held...)
	a.mu.Unlock()
	reply.Held, reply.Errors = len(held), errs
	return nil
}

func (a *Agent) lockOnce(ctx context.Context, s lockservice.Session, name string, timeout time.Duration) (lockservice.Lease, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return s.Lock(ctx, name)
}
