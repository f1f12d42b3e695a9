package agent

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/raftlock/raftlock/bench/internal/lockservice"
)

// parallelism bounds the concurrent set-up and tear-down calls of one
// replica process (session opens and closes).
const parallelism = 16

// OpenSessions replaces the session pool with args.Count new sessions.
func (a *Agent) OpenSessions(args OpenArgs, _ *Empty) error {
	r, err := a.started()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(a.ctx, args.Timeout)
	defer cancel()
	a.closePool(ctx)
	pool := make([]lockservice.Session, args.Count)
	err = forEach(ctx, args.Count, parallelism, func(ctx context.Context, i int) error {
		s, err := r.NewSession(ctx, args.TTL)
		pool[i] = s
		return err
	})
	if err != nil {
		for _, s := range pool {
			if s != nil {
				s.Close(ctx)
			}
		}
		return fmt.Errorf("replica %d: open %d sessions: %w", a.index, args.Count, err)
	}
	a.mu.Lock()
	a.pool, a.ttl = pool, args.TTL
	a.mu.Unlock()
	return nil
}

// CloseSessions closes the session pool, releasing the locks it holds.
func (a *Agent) CloseSessions(args CloseArgs, _ *Empty) error {
	ctx, cancel := context.WithTimeout(a.ctx, args.Timeout)
	defer cancel()
	return a.closePool(ctx)
}

func (a *Agent) closePool(ctx context.Context) error {
	a.mu.Lock()
	pool := a.pool
	a.pool, a.held = nil, nil
	a.mu.Unlock()
	return forEach(ctx, len(pool), parallelism, func(ctx context.Context, i int) error {
		return pool[i].Close(ctx)
	})
}

// session returns pool session k.
func (a *Agent) session(k int) (lockservice.Session, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if k >= len(a.pool) {
		return nil, fmt.Errorf("replica %d: session %d of a pool of %d", a.index, k, len(a.pool))
	}
	return a.pool[k], nil
}

// renew replaces pool session k, which was lost, by a new one.
func (a *Agent) renew(ctx context.Context, k int, lost lockservice.Session) error {
	r, err := a.started()
	if err != nil {
		return err
	}
	lost.Close(ctx)
	a.mu.Lock()
	ttl := a.ttl
	a.mu.Unlock()
	s, err := r.NewSession(ctx, ttl)
	if err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if k < len(a.pool) && a.pool[k] == lost {
		a.pool[k] = s
		return nil
	}
	s.Close(ctx)
	return errors.New("session pool replaced meanwhile")
}

// forEach runs fn(0..n-1) with at most par calls at once and returns the
// first error with a count of the others; it stops starting calls once ctx
// ends.
func forEach(ctx context.Context, n, par int, fn func(ctx context.Context, i int) error) error {
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		first  error
		failed int
		sem    = make(chan struct{}, max(par, 1))
	)
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if first == nil {
			first = err
		}
		failed++
	}
	for i := range n {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if err := ctx.Err(); err != nil {
			fail(err)
			break
		}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := fn(ctx, i); err != nil {
				fail(err)
			}
		})
	}
	wg.Wait()
	if first == nil {
		return nil
	}
	if failed > 1 {
		return fmt.Errorf("%w (and %d more failures)", first, failed-1)
	}
	return first
}
