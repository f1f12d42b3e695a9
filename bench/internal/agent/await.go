package agent

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/raftlock/raftlock/bench/internal/mono"
)

// awaiting is a batch of blocked Lock calls started by StartAwait.
type awaiting struct {
	done    chan struct{} // closed when every call has returned
	granted []int64       // mono ns of each grant (0: not granted)
	errs    Errors
}

// StartAwait starts one Lock call per name, pool session i%len(pool) for
// name i, each bounded by args.Timeout, and returns at once; AwaitResult
// collects them. The leases are kept (until CloseSessions).
func (a *Agent) StartAwait(args AwaitArgs, _ *Empty) error {
	if _, err := a.started(); err != nil {
		return err
	}
	a.mu.Lock()
	pool := a.pool
	a.mu.Unlock()
	if len(pool) == 0 {
		return fmt.Errorf("replica %d: await with no sessions", a.index)
	}
	w := &awaiting{done: make(chan struct{}), granted: make([]int64, len(args.Names))}
	var (
		wg sync.WaitGroup
		mu sync.Mutex
	)
	for i, name := range args.Names {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(a.ctx, args.Timeout)
			defer cancel()
			l, err := pool[i%len(pool)].Lock(ctx, name)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				w.errs.add(err)
				return
			}
			w.granted[i] = mono.Now()
			a.mu.Lock()
			a.held = append(a.held, l)
			a.mu.Unlock()
		})
	}
	go func() {
		wg.Wait()
		close(w.done)
	}()
	a.mu.Lock()
	a.await = w
	a.mu.Unlock()
	return nil
}

// AwaitResult waits (at most args.Timeout) until every call StartAwait
// started has returned and reports the grant instants.
func (a *Agent) AwaitResult(args AwaitArgs, reply *AwaitReply) error {
	a.mu.Lock()
	w := a.await
	a.mu.Unlock()
	if w == nil {
		return fmt.Errorf("replica %d: no await started", a.index)
	}
	select {
	case <-w.done:
	case <-time.After(args.Timeout):
		return fmt.Errorf("replica %d: lock calls still waiting after %v", a.index, args.Timeout)
	}
	reply.Granted, reply.Errors = w.granted, w.errs
	return nil
}

// Lost reports how many pool sessions have been lost (expired or closed
// by the service) so far.
func (a *Agent) Lost(_ Empty, reply *LostReply) error {
	a.mu.Lock()
	pool := a.pool
	a.mu.Unlock()
	reply.Sessions = len(pool)
	for _, s := range pool {
		select {
		case <-s.Done():
			reply.Lost++
		default:
		}
	}
	return nil
}
