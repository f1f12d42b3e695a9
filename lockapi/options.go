package lockapi

import (
	"log/slog"
	"time"

	"github.com/raftlock/raftlock/internal/replica"
	"github.com/raftlock/raftlock/node"
)

// DefaultTTL is the session TTL when WithTTL is not given.
const DefaultTTL = 10 * time.Second

// MinTTL returns the smallest TTL a session on n may have: a keepalive
// interval (TTL/3) must outlast a leader failover, which takes up to about
// two heartbeat timeouts plus an election timeout. A nil n stands for a
// node with the default timing (node.DefaultConfig).
func MinTTL(n *node.Node) time.Duration { return MinTTLFor(timingOf(n)) }

// MinTTLFor is MinTTL for a node with timing t (a program checks its
// configuration before it starts the node).
func MinTTLFor(t node.Timing) time.Duration { return minTTLOf(t.HeartbeatTimeout, t.ElectionTimeout) }

func minTTLOf(heartbeat, election time.Duration) time.Duration {
	return 3 * (2*heartbeat + election)
}

// electionTimeout returns r's Raft election timeout.
func electionTimeout(r replica.Replica) time.Duration {
	_, election := r.Timeouts()
	return election
}

// electionTimeout returns the election timeout of the session's replica:
// how long a call waits before a context error is reported as no quorum
// (explainFailure).
func (s *Session) electionTimeout() time.Duration { return electionTimeout(s.r) }

// timingOf returns n's Raft timing, or the default timing for a nil n.
func timingOf(n *node.Node) node.Timing {
	if n == nil {
		return node.DefaultConfig().Timing
	}
	return n.Timing()
}

// SessionOption configures NewSession.
type SessionOption func(*sessionConfig)

type sessionConfig struct {
	ttl       time.Duration
	lockDelay time.Duration
	owner     string
	logger    *slog.Logger
	metrics   *Metrics
	onState   func(from, to State)
	reserved  bool
}

// WithTTL sets the session's TTL: how long the cluster keeps the session (and
// its locks) without a successful keepalive. Default DefaultTTL; at least
// MinTTL(n) and at most 24 h.
func WithTTL(d time.Duration) SessionOption { return func(c *sessionConfig) { c.ttl = d } }

// WithLockDelay sets the lock-delay: when the session expires (rather than
// being closed), the locks it held stay ungranted for this long, giving a
// paused holder's in-flight writes time to drain (as in Chubby and Consul).
// A lapse has the same effect whoever notices it first — the leader, this
// library (the session is lost on its client deadline, which comes first
// by design, and its close, an Unlock after it, or Abandon, release with
// the delay), or the admin API's keeper of HTTP leases — from cluster
// version 4; below it (a rolling upgrade) a lapse noticed on the client
// released without the delay. Close and Unlock while the session is valid
// release at once, as does an operator's EndSession. Default 0; at most 1 h.
func WithLockDelay(d time.Duration) SessionOption { return func(c *sessionConfig) { c.lockDelay = d } }

// WithOwner sets a free-text description of the session's owner (process,
// host, purpose), shown to those who find a lock held. At most 256 bytes of
// UTF-8. Default: the node's id.
func WithOwner(description string) SessionOption {
	return func(c *sessionConfig) { c.owner = description }
}

// WithReserve lets the session open in its node's reserve when the
// cluster's session quota or the node's fair share of it is used up: each
// node keeps a few sessions (4) for its own housekeeping — the admin
// server's shared session uses it — so that clients which used up the
// node's share do not lock the replica's own tools out. Needs cluster
// version 4 (ignored before).
func WithReserve() SessionOption { return func(c *sessionConfig) { c.reserved = true } }

// WithLogger sets the session's logger (default: the node's).
func WithLogger(l *slog.Logger) SessionOption { return func(c *sessionConfig) { c.logger = l } }

// WithMetrics records the session's metrics in m (see NewMetrics).
func WithMetrics(m *Metrics) SessionOption { return func(c *sessionConfig) { c.metrics = m } }

// WithStateListener calls f on every session state change (Healthy →
// Jeopardy → Lost, Jeopardy → Healthy, → Closed), in order, from the
// session's own goroutine: f must not block or call back into the session.
func WithStateListener(f func(from, to State)) SessionOption {
	return func(c *sessionConfig) { c.onState = f }
}
