package lockapi

import (
	"context"
	"sync"
)

// SingletonOption configures RunSingleton.
type SingletonOption func(*singletonConfig)

// SingletonCallbacks are client-go-style leader-election callbacks for
// RunSingleton. Each may be nil.
type SingletonCallbacks struct {
	// OnStartedLeading is called on RunSingleton's goroutine when this
	// replica's lease is granted, before the job runs.
	OnStartedLeading func(lease *Lease)
	// OnStoppedLeading is called on RunSingleton's goroutine once per
	// leadership, after the job's context ended and the job returned
	// (jobErr is what it returned), before the lock is released: when it
	// runs the job no longer does, and no other replica's job has started
	// (unless the lease was lost: lease.Err says).
	OnStoppedLeading func(lease *Lease, jobErr error)
	// OnNewLeader is called with every change of the election's leader as
	// this replica applies it — this replica's own leadership included,
	// and nobody leading — in order (see Election.Observe), from a
	// goroutine of its own. RunSingleton returns after its last call
	// returned. It must not block for long: changes queue behind it.
	OnNewLeader func(Leader)
}

// WithCallbacks sets RunSingleton's callbacks.
func WithCallbacks(cb SingletonCallbacks) SingletonOption {
	return func(c *singletonConfig) { c.cb = cb }
}

type singletonConfig struct {
	cb SingletonCallbacks
}

func (c *singletonConfig) started(l *Lease) {
	if f := c.cb.OnStartedLeading; f != nil {
		f(l)
	}
}

func (c *singletonConfig) stopped(l *Lease, err error) {
	if f := c.cb.OnStoppedLeading; f != nil {
		f(l, err)
	}
}

// observe runs OnNewLeader on the election's changes until the returned
// stop is called (which waits for the last call to return).
func (c *singletonConfig) observe(ctx context.Context, s *Session, name string) (stop func(), err error) {
	f := c.cb.OnNewLeader
	if f == nil {
		return func() {}, nil
	}
	e, err := NewElection(s.n, name)
	if err != nil {
		return nil, err
	}
	octx, cancel := context.WithCancel(ctx)
	ch, err := e.Observe(octx)
	if err != nil {
		cancel()
		return nil, err
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for l := range ch {
			f(l)
		}
	}()
	return func() { cancel(); wg.Wait() }, nil
}
