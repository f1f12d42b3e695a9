package lockapi

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

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
		// One attempt may take up to TTL/6, and never past the lease deadline.
		ctx, cancel := context.WithDeadline(s.ctx, minTime(s.ValidUntil(), sent.Add(ttl/6)))
		err := s.n.KeepAlive(ctx, s.id)
		cancel()
		switch {
		case err == nil:
			s.renewed(sent)
			timer.Reset(s.nextKeepAlive())
		case errors.Is(err, node.ErrSessionExpired):
			s.lose(fmt.Errorf("%w: the leader refused the keepalive (%v)", ErrSessionExpired, err))
			return
		case errors.Is(err, node.ErrClosed):
			s.lose(fmt.Errorf("%w: the node is closed: %w", ErrSessionExpired, node.ErrClosed))
			return
		default:
			if s.ctx.Err() != nil {
				return
			}
			s.metrics.keepaliveFailed()
			s.jeopardy(err)
			timer.Reset(jitter(ttl / 10))
		}
	}
}

// nextKeepAlive returns when to renew next: every TTL/3 (jittered), but
// sooner if less of the lease is left than usual (a slow open or renewal),
// so that there is always time for another attempt before the deadline.
func (s *Session) nextKeepAlive() time.Duration {
	return max(min(jitter(s.cfg.ttl/3), time.Until(s.ValidUntil())/2), s.cfg.ttl/50)
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
