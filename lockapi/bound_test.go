package lockapi

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raftlock/raftlock/internal/testing/clustertest"
	"github.com/raftlock/raftlock/node"
)

// A Lock with no deadline whose Acquire cannot commit (its replica is cut
// off) returns ErrSessionExpired as soon as the session is lost — not when
// the partition heals.
func TestLockReturnsWhenSessionIsLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := startCluster(t, clustertest.Options{})
		m := c.Follower(c.WaitLeader(time.Second))
		s := newSession(t, c, m)
		held, err := s.Lock(context.Background(), "held")
		if err != nil {
			t.Fatal(err)
		}
		c.Isolate(m)
		lockErr := make(chan error, 1)
		go func() {
			_, err := s.Lock(context.Background(), "y") // no deadline
			lockErr <- err
		}()
		unlockErr := make(chan error, 1)
		go func() { unlockErr <- held.Unlock(context.Background()) }()
		<-s.Done()
		lost := time.Now()
		for what, ch := range map[string]chan error{"Lock": lockErr, "Unlock": unlockErr} {
			select {
			case err := <-ch:
				// Lost because its keepalives could not reach a quorum:
				// the error says both.
				if !errors.Is(err, ErrSessionExpired) || !errors.Is(err, ErrNoQuorum) {
					t.Errorf("%s after the session was lost: %v", what, err)
				}
				if d := time.Since(lost); d > 100*time.Millisecond {
					t.Errorf("%s returned %v after the session was lost", what, d)
				}
			case <-time.After(10 * time.Second):
				t.Errorf("%s still blocked 10 s after its session was lost", what)
				c.Heal()
				<-ch
			}
		}
	})
}

// noPanic runs f and turns a panic into a test failure.
func noPanic(t *testing.T, what string, f func() error) (err error) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("%s panicked: %v", what, r)
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return f()
}

// Every entry point refuses a nil context, a nil session or node, a bad
// name or a nil option with ErrInvalidArgument — no panic, nothing sent.
func TestEntryPointsValidateArguments(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := startCluster(t, clustertest.Options{})
		ctx := context.Background()
		n := c.Nodes[0]
		s := newSession(t, c, 0)
		l, err := s.Lock(ctx, "mine")
		if err != nil {
			t.Fatal(err)
		}
		var nilCtx context.Context
		job := func(context.Context, *Lease) error { return nil }
		election, err := NewElection(n, "a")
		if err != nil {
			t.Fatal(err)
		}
		for what, f := range map[string]func() error{
			"NewSession nil ctx":    func() error { _, err := NewSession(nilCtx, n); return err },
			"NewSession nil option": func() error { _, err := NewSession(ctx, n, nil); return err },
			"Lock nil ctx":          func() error { _, err := s.Lock(nilCtx, "a"); return err },
			"TryLock nil ctx":       func() error { _, err := s.TryLock(nilCtx, "a"); return err },
			"Lock nil session":      func() error { _, err := (*Session)(nil).Lock(ctx, "a"); return err },
			"Unlock nil ctx":        func() error { return l.Unlock(nilCtx) },
			"Unlock nil lease":      func() error { return (*Lease)(nil).Unlock(ctx) },
			"Close nil ctx":         func() error { return s.Close(nilCtx) },
			"RunSingleton nil ctx":  func() error { return RunSingleton(nilCtx, s, "a", job) },
			"RunSingleton no name":  func() error { return RunSingleton(ctx, s, "", job) },
			"RunSingleton 1 MiB name": func() error {
				return RunSingleton(ctx, s, strings.Repeat("n", 1<<20), job)
			},
			"NewElection nil node": func() error { _, err := NewElection(nil, "a"); return err },
			"Observe nil ctx":      func() error { _, err := election.Observe(nilCtx); return err },
			"LeaderSync nil ctx":   func() error { _, err := election.LeaderSync(nilCtx); return err },
		} {
			done := make(chan error, 1)
			go func() { done <- noPanic(t, what, f) }()
			select {
			case err := <-done:
				if !errors.Is(err, ErrInvalidArgument) {
					t.Errorf("%s: %v, want ErrInvalidArgument", what, err)
				}
			case <-time.After(5 * time.Second):
				t.Errorf("%s: no answer within 5 s", what)
			}
		}
		noPanic(t, "MinTTL and TryTimeout of a nil node", func() error {
			if MinTTL(nil) <= 0 || TryTimeout(nil) <= 0 {
				t.Errorf("MinTTL(nil) %v, TryTimeout(nil) %v", MinTTL(nil), TryTimeout(nil))
			}
			return nil
		})
		if s.WaitForStateChange(nilCtx, StateHealthy) {
			t.Errorf("WaitForStateChange with a nil context reported a change")
		}
		if err := l.Err(); err != nil {
			t.Errorf("the session's lease was disturbed: %v", err)
		}
		if err := s.Err(); err != nil {
			t.Errorf("the session was disturbed: %v", err)
		}
	})
}

// RunSingleton on a closed session returns ErrSessionClosed without running
// the job; on a closed node it returns ErrClosed.
func TestSingletonOnClosedSessionOrNode(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := startCluster(t, clustertest.Options{})
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		job := func(context.Context, *Lease) error {
			t.Errorf("the job ran")
			return nil
		}
		s := newSession(t, c, 0)
		if err := s.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if err := RunSingleton(ctx, s, "a", job); !errors.Is(err, ErrSessionClosed) {
			t.Errorf("RunSingleton on a closed session: %v", err)
		}

		s2 := newSession(t, c, 2)
		c.Stop(2)
		if err := RunSingleton(ctx, s2, "a", job); !errors.Is(err, node.ErrClosed) || ctx.Err() != nil {
			t.Errorf("RunSingleton on a closed node: %v", err)
		}
	})
}
