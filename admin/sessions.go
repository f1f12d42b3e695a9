package admin

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/raftlock/raftlock/lockapi"
	"github.com/raftlock/raftlock/node"
)

var errClosed = errors.New("admin: server closed")

// SessionKeeper holds one session and replaces it when it is lost (a lost
// session is final: its leases ended with it, and a new one must be opened).
type SessionKeeper struct {
	n         *node.Node
	ttl       time.Duration
	lockDelay time.Duration
	opts      []lockapi.SessionOption

	mu      sync.Mutex
	cur     *lockapi.Session
	gen     int           // sessions opened so far
	opening chan struct{} // closed when the open in progress ends
	lastErr error         // of the last failed open
	closed  bool
}

// NewSessionKeeper returns a keeper of sessions opened on n with ttl,
// lockDelay and opts. It opens none until Get is called.
func NewSessionKeeper(n *node.Node, ttl, lockDelay time.Duration, opts ...lockapi.SessionOption) *SessionKeeper {
	opts = append([]lockapi.SessionOption{lockapi.WithTTL(ttl), lockapi.WithLockDelay(lockDelay)}, opts...)
	return &SessionKeeper{n: n, ttl: ttl, lockDelay: lockDelay, opts: opts}
}

// Get returns the current session if it is still open, or opens a new one
// (one open at a time; concurrent callers wait for it).
func (m *SessionKeeper) Get(ctx context.Context) (*lockapi.Session, error) {
	for {
		m.mu.Lock()
		switch {
		case m.closed:
			m.mu.Unlock()
			return nil, errClosed
		case m.cur != nil && m.cur.Err() == nil:
			s := m.cur
			m.mu.Unlock()
			return s, nil
		case m.opening != nil:
			ch := m.opening
			m.mu.Unlock()
			start := time.Now()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				err := ctx.Err()
				if time.Since(start) >= m.n.Timing().ElectionTimeout {
					// The open in progress could not commit in the time we had.
					err = fmt.Errorf("%w: %w", lockapi.ErrNoQuorum, err)
				}
				return nil, fmt.Errorf("admin: waiting for the HTTP session: %w", err)
			}
		}
		ch := make(chan struct{})
		m.opening = ch
		old := m.cur
		m.mu.Unlock()

		if old != nil {
			// Lost: Close only releases its local resources.
			closeCtx, cancel := context.WithTimeout(ctx, time.Second)
			old.Close(closeCtx)
			cancel()
		}
		s, err := lockapi.NewSession(ctx, m.n, m.opts...)

		m.mu.Lock()
		m.opening = nil
		close(ch)
		closed := m.closed
		if err == nil && !closed {
			m.cur, m.gen, m.lastErr = s, m.gen+1, nil
		} else if err != nil {
			m.lastErr = err
		}
		m.mu.Unlock()
		if err != nil {
			return nil, err
		}
		if closed {
			s.Close(ctx)
			return nil, errClosed
		}
		return s, nil
	}
}

// SessionInfo describes the kept session.
type SessionInfo struct {
	ID               uint64 `json:"id"`
	State            string `json:"state"`
	TTLMS            int64  `json:"ttl_ms"`
	LockDelayMS      int64  `json:"lock_delay_ms"`
	ValidUntilUnixMS int64  `json:"valid_until_unix_ms,omitempty"`
	Generation       int    `json:"generation"` // sessions opened by this process so far
	Error            string `json:"error,omitempty"`
}

// Info describes the kept session.
func (m *SessionKeeper) Info() SessionInfo {
	m.mu.Lock()
	cur, gen, lastErr, opening := m.cur, m.gen, m.lastErr, m.opening != nil
	m.mu.Unlock()
	in := SessionInfo{TTLMS: m.ttl.Milliseconds(), LockDelayMS: m.lockDelay.Milliseconds(), Generation: gen}
	switch {
	case cur != nil:
		in.ID, in.State = uint64(cur.ID()), cur.State().String()
		if err := cur.Err(); err != nil {
			in.Error = err.Error()
		} else {
			in.ValidUntilUnixMS = cur.ValidUntil().UnixMilli()
		}
	case opening:
		in.State = "opening"
	default:
		in.State = "none"
	}
	if lastErr != nil && (cur == nil || cur.Err() != nil) {
		in.Error = lastErr.Error()
	}
	return in
}

// Close closes the current session; Get fails afterwards.
func (m *SessionKeeper) Close(ctx context.Context) error {
	m.mu.Lock()
	m.closed = true
	cur := m.cur
	m.cur = nil
	m.mu.Unlock()
	if cur == nil {
		return nil
	}
	return cur.Close(ctx)
}

// leave ends the keeper without closing the current session, which stays
// open until its node closes (then the leader expires it); Get fails
// afterwards.
func (m *SessionKeeper) leave() {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
}
