package agent

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/raftlock/raftlock/bench/internal/lockservice"
	"github.com/raftlock/raftlock/bench/internal/mono"
)

// maxOpsPerWorker bounds a worker's loop by count as well as by time.
const maxOpsPerWorker = 2_000_000

// errorPause is how long a worker waits after a failed operation before the
// next one, so that an unavailable cluster is not spun against.
const errorPause = time.Millisecond

// Loop runs the workers of args and returns their completed operations.
func (a *Agent) Loop(args LoopArgs, reply *LoopReply) error {
	if _, err := a.started(); err != nil {
		return err
	}
	for k := range args.Workers {
		if _, err := a.session(k); err != nil {
			return err
		}
	}
	a.profileWindow(a.system, args.StartAt, args.StopAt)
	results := make([]LoopReply, len(args.Workers))
	var wg sync.WaitGroup
	for k, w := range args.Workers {
		wg.Go(func() { results[k] = a.work(k, w, args) })
	}
	wg.Wait()
	for _, r := range results {
		reply.Ops = append(reply.Ops, r.Ops...)
		reply.Errors.Merge(r.Errors)
	}
	return nil
}

// work is worker k's loop.
func (a *Agent) work(k int, w WorkerSpec, args LoopArgs) LoopReply {
	var out LoopReply
	mono.Sleep(args.StartAt)
	for n := 0; n < maxOpsPerWorker && mono.Now() < args.StopAt && a.ctx.Err() == nil; n++ {
		name := w.Name
		if w.Fresh {
			name = fmt.Sprintf("%s/%d", w.Name, n)
		}
		op, err := a.lockUnlock(k, name, w)
		if err != nil {
			out.Errors.add(err)
			time.Sleep(errorPause)
			continue
		}
		out.Ops = append(out.Ops, op)
	}
	return out
}

// lockUnlock makes one Lock+Unlock (of w's mode) with pool session k,
// replacing the session first if it was lost.
func (a *Agent) lockUnlock(k int, name string, w WorkerSpec) (Op, error) {
	s, err := a.session(k)
	if err != nil {
		return Op{}, err
	}
	ctx, cancel := context.WithTimeout(a.ctx, w.Timeout)
	defer cancel()
	select {
	case <-s.Done():
		if err := a.renew(ctx, k, s); err != nil {
			return Op{}, fmt.Errorf("renew lost session: %w", err)
		}
		return Op{}, fmt.Errorf("session was lost (renewed)")
	default:
	}
	op := Op{Worker: int32(k), LockStart: mono.Now()}
	l, err := take(ctx, s, name, w)
	op.Granted = mono.Now()
	if err != nil {
		return Op{}, fmt.Errorf("lock: %w", err)
	}
	op.UnlockStart = mono.Now()
	err = l.Unlock(ctx)
	op.UnlockEnd = mono.Now()
	if err != nil {
		return Op{}, fmt.Errorf("unlock: %w", err)
	}
	return op, nil
}

// take acquires what the worker's mode asks for.
func take(ctx context.Context, s lockservice.Session, name string, w WorkerSpec) (lockservice.Lease, error) {
	switch w.Mode {
	case "":
		return s.Lock(ctx, name)
	case ModeSemaphore:
		if sem, ok := s.(lockservice.SemaphoreSession); ok {
			return sem.Acquire(ctx, name, w.Limit, w.Permits)
		}
	case ModeRead, ModeWrite:
		if rw, ok := s.(lockservice.RWSession); ok {
			if w.Mode == ModeRead {
				return rw.RLock(ctx, name)
			}
			return rw.WLock(ctx, name)
		}
	}
	return nil, fmt.Errorf("%w: %q", ErrUnsupported, w.Mode)
}

// ErrUnsupported: the system under test has no such primitive.
var ErrUnsupported = errors.New("not supported by this system")
