package lockapi

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/raftlock/raftlock/internal/leasetrace"
	"github.com/raftlock/raftlock/internal/replica"
	"github.com/raftlock/raftlock/node"
)

// keepAlive renews the session every TTL/3 (jittered). A failed keepalive
// puts the session in jeopardy and is retried every TTL/10; the lease
// deadline itself is enforced by watch.
func (s *Session) keepAlive() {
	defer s.wg.Done()
	ttl := s.cfg.ttl
	timer := time.NewTimer(s.nextKeepAlive())
	defer timer.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-timer.C:
		}
		if s.checkDeadline(); s.ctx.Err() != nil {
			return
		}
		if s.isPaused() {
			timer.Reset(s.nextKeepAlive())
			continue
		}
		sent := time.Now()
		s.traceKeepAliveSent(sent)
		// One attempt may take up to TTL/6, and never past the lease deadline.
		ctx, cancel := context.WithDeadline(s.ctx, minTime(s.ValidUntil(), sent.Add(ttl/6)))
		err := s.r.KeepAlive(ctx, s.id)
		cancel()
		switch {
		case err == nil:
			s.renewed(sent)
			s.traceKeepAliveResult(sent, "")
			timer.Reset(s.nextKeepAlive())
		case errors.Is(err, replica.ErrSessionExpired):
			s.traceKeepAliveResult(sent, leasetrace.VerdictRefused)
			s.lose(leasetrace.LostRefused, fmt.Errorf("%w: the leader refused the keepalive (%v)", ErrSessionExpired, err))
			return
		case errors.Is(err, node.ErrClosed):
			s.traceKeepAliveResult(sent, leasetrace.VerdictFailed)
			s.lose(leasetrace.LostClosed, fmt.Errorf("%w: the node is closed: %w", ErrSessionExpired, node.ErrClosed))
			return
		default:
			if s.ctx.Err() != nil {
				return
			}
			s.traceKeepAliveResult(sent, leasetrace.VerdictFailed)
			s.metrics.keepaliveFailed()
			s.jeopardy(err)
			timer.Reset(jitter(ttl / 10))
		}
	}
}

// nextKeepAlive returns when to renew next (keepAliveDelay).
func (s *Session) nextKeepAlive() time.Duration {
	return keepAliveDelay(time.Now(), s.ValidUntil(), keepaliveEpoch, s.cfg.ttl, jitter)
}

// keepaliveEpoch is the origin of the keepalive grid: the Unix epoch, on
// the wall clock, so that every process on a host (and hosts whose clocks
// agree) shares one grid and the leader receives their keepalives
// together. The wall clock decides only the phase: a clock step moves the
// grid, and every delay stays within (d − quantum, d] of the plan.
var keepaliveEpoch = time.Unix(0, 0)

// keepAliveDelay plans the next keepalive at now: every TTL/3 (jittered),
// but sooner if less of the lease (until validUntil) is left than usual (a
// slow open or renewal), so that there is always time for another attempt
// before the deadline; never sooner than TTL/50.
//
// The instant is moved earlier, by less than keepaliveQuantum(TTL) (at most
// TTL/20), onto a grid shared by every session (from epoch): a process's
// keepalives fire together, in one wakeup, and on the leader share one
// leadership round — a node with many sessions wakes a few times a second,
// not once per keepalive (TestKeepalivesFireTogether). A delay too short to
// move keeps its instant.
func keepAliveDelay(now, validUntil, epoch time.Time, ttl time.Duration, jitter func(time.Duration) time.Duration) time.Duration {
	d := max(min(jitter(ttl/3), validUntil.Sub(now)/2), ttl/50)
	q := keepaliveQuantum(ttl)
	at := now.Add(d).Sub(epoch)
	if aligned := at - at%q - now.Sub(epoch); aligned >= ttl/50 {
		return aligned
	}
	return d
}

// keepaliveQuantum is the keepalive grid's step for a TTL: 500 ms halved
// until it is at most TTL/20, so that the grids of different TTLs nest
// (every point of a coarser grid is on the finer ones). A coarser grid
// means fewer wakeups and leadership rounds, and keepalives a little more
// often (on average TTL/3 − quantum/2 apart).
func keepaliveQuantum(ttl time.Duration) time.Duration {
	q := 500 * time.Millisecond
	for q > time.Millisecond && q > ttl/20 {
		q /= 2
	}
	return q
}

// renewed moves the client-side deadline to sent + TTL − margin.
func (s *Session) renewed(sent time.Time) {
	s.mu.Lock()
	if s.state == StateLost || s.state == StateClosed {
		s.mu.Unlock()
		return
	}
	if v := sent.Add(s.cfg.ttl - s.margin); v.After(s.validUntil) {
		s.validUntil = v
	}
	s.keepaliveErr = nil
	notify := s.setState(StateHealthy)
	s.mu.Unlock()
	notify()
}

func (s *Session) jeopardy(err error) {
	s.mu.Lock()
	s.keepaliveErr = err
	if s.state != StateHealthy {
		s.mu.Unlock()
		return
	}
	notify := s.setState(StateJeopardy)
	left := time.Until(s.validUntil)
	s.mu.Unlock()
	s.log.Warn("session in jeopardy: keepalive failed", "err", err, "lease_left", left.Round(time.Millisecond))
	notify()
}

func (s *Session) isPaused() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.paused
}

// pauseKeepalives suspends (true) or resumes keepalives: tests simulate a
// paused process with it.
func (s *Session) pauseKeepalives(p bool) {
	s.mu.Lock()
	s.paused = p
	s.mu.Unlock()
}

func jitter(d time.Duration) time.Duration {
	return d - d/10 + rand.N(d/5+1)
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
