package chaos

import (
	"context"
	"time"

	"github.com/raftlock/raftlock/lockapi"
)

// The shared grants of the workload (simConfig.SharedClients): readers
// and writers of a read-write lock and holders of a semaphore's permits.
// The operator revokes such grants, and their answers get lost; the
// primitives' checks judge them (check_primitives.go).

// Names and limit of the shared workload.
const (
	rwLock   = "rw-0"
	semName  = "sem-0"
	semLimit = 3
)

// primitives names the shared workload's names: a read-write lock (limit
// 0) and a semaphore (its limit) (History.Primitives).
func primitives() map[string]int { return map[string]int{rwLock: 0, semName: semLimit} }

// sharedWorker runs shared cycles until the end of the workload.
func (s *sim) sharedWorker(id int) { s.runWorker(id, s.sharedCycle) }

// sharedCycle is one acquire / hold / unlock round of a shared grant: a
// read grant or a write grant of the read-write lock, or one or two of the
// semaphore's permits; a quarter of them try once instead of waiting.
func (s *sim) sharedCycle(w *workerState) {
	ttl := s.cfg.TTL
	try := w.rng.Float64() < 0.25
	op := Op{Client: w.id, Node: s.c.ID(w.node), Session: uint64(w.sess.ID())}
	sem := lockapi.Semaphore{Name: semName, Limit: semLimit}
	n := 1 + w.rng.IntN(2)
	var acquire func(ctx context.Context) (*lockapi.Lease, error)
	switch k := w.rng.IntN(10); {
	case k < 4:
		op.Kind, op.Lock, op.Shared = OpReadAcquire, rwLock, true
		acquire = func(ctx context.Context) (*lockapi.Lease, error) { return w.sess.RLock(ctx, rwLock) }
		if try {
			op.Kind = OpTryReadAcquire
			acquire = func(ctx context.Context) (*lockapi.Lease, error) { return w.sess.TryRLock(ctx, rwLock) }
		}
	case k < 6:
		op.Kind, op.Lock = OpAcquire, rwLock
		acquire = func(ctx context.Context) (*lockapi.Lease, error) { return w.sess.Lock(ctx, rwLock) }
		if try {
			op.Kind = OpTryAcquire
			acquire = func(ctx context.Context) (*lockapi.Lease, error) { return w.sess.TryLock(ctx, rwLock) }
		}
	default:
		op.Kind, op.Lock, op.Permits = OpSemAcquire, semName, n
		acquire = func(ctx context.Context) (*lockapi.Lease, error) { return w.sess.Acquire(ctx, sem, n) }
		if try {
			op.Kind = OpTrySemAcquire
			acquire = func(ctx context.Context) (*lockapi.Lease, error) { return w.sess.TryAcquire(ctx, sem, n) }
		}
	}
	timeout := ttl + time.Duration(w.rng.Int64N(int64(2*ttl)))
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	op.Invoke = now()
	op.Deadline = op.Invoke + int64(timeout)
	lease, idx := s.acquire(w.sess, &op, func() (*lockapi.Lease, error) {
		defer cancel()
		return acquire(ctx)
	})
	if lease == nil {
		return
	}
	lost := watchLease(lease)
	s.holding[w.id].Store(int32(w.node))
	hold := time.Duration(w.rng.Int64N(int64(ttl / 3)))
	if w.rng.Float64() < 0.1 { // a slow holder: keepalives still running
		hold += time.Duration(w.rng.Int64N(int64(3 * ttl / 2)))
	}
	time.Sleep(hold)
	s.freezePoint(w.node)
	s.holding[w.id].Store(-1)
	s.release(w, op, idx, lease, lost)
}

// watchLease returns a channel that receives the time the lease ended
// (lost or released).
func watchLease(l *lockapi.Lease) <-chan int64 {
	lost := make(chan int64, 1)
	go func() {
		<-l.Done()
		lost <- now()
	}()
	return lost
}
