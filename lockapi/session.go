package lockapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/leasetrace"
	"github.com/raftlock/raftlock/internal/lockinfo"
	"github.com/raftlock/raftlock/internal/replica"
	"github.com/raftlock/raftlock/node"
)

// State is where a session stands.
type State int

// Session states. A session starts Healthy. It is in Jeopardy while its
// keepalives fail but its lease has not yet run out — work should prepare to
// stop. It is Lost once its lease ran out on the client (or the leader
// expired it, or Abandon gave it up): every lease it held has ended. Closed
// after Close. Lost and Closed are final.
const (
	StateHealthy State = iota + 1
	StateJeopardy
	StateLost
	StateClosed
)

func (s State) String() string {
	switch s {
	case StateHealthy:
		return "healthy"
	case StateJeopardy:
		return "jeopardy"
	case StateLost:
		return "lost"
	case StateClosed:
		return "closed"
	}
	return "unknown"
}

// Session is one lease with the cluster, kept alive by keepalives every TTL/3
// for as long as it is open. All locks taken through it live and die with it.
//
// A Session is safe for concurrent use: many goroutines may take locks
// through one session; each Lock call is its own acquisition (its own owner
// id and fencing token), queued like a stranger's. But a session never
// waits for a grant it holds itself: an acquisition that could only be
// granted after one of the session's own grants is released fails at once
// with ErrAlreadyHeld (see Lock). Goroutines that must exclude each other
// through one lock take a session each.
type Session struct {
	n       *node.Node
	r       replica.Replica // n's (replica.Of): every call to the replica goes through it
	id      lockinfo.SessionID
	cfg     sessionConfig
	margin  time.Duration
	log     *slog.Logger
	metrics *Metrics
	sub     *replica.Subscription
	seq     seqAlloc // request numbers for exactly-once commands (seq.go)

	ctx    context.Context // ends when the session is lost or closed
	cancel context.CancelCauseFunc
	// closing ends when Close is called (also on a session already lost):
	// RunSingleton stops on it even while it runs on a replacement session.
	closing     context.Context
	markClosing context.CancelFunc
	stop        chan struct{} // closed by end: stops the session's goroutines
	wg          sync.WaitGroup

	mu           sync.Mutex
	state        State
	changed      chan struct{}                 // closed and replaced on every state change
	err          error                         // why the session ended
	validUntil   time.Time                     // client-side lease deadline (monotonic)
	keepaliveErr error                         // of the last keepalive, if it failed
	pending      map[lockinfo.OwnerID]*pending // acquisitions waiting for their outcome
	leases       map[lockinfo.OwnerID]*Lease   // granted and not unlocked
	held         map[string][]*Lease           // the leases by name (held.go)
	releases     map[lockinfo.OwnerID]*release // releases that must commit, or settle (see release)
	settling     []*release                    // committed releases the local replica has not applied yet
	// syncedAt is the applied index at which the last resync read the
	// state: the events at or below it are in what resync judged, and the
	// watch skips them (after a restore they can arrive after the Resync).
	syncedAt  uint64
	paused    bool // tests: keepalives suspended
	closeOnce sync.Once
	closeErr  error
	// lapsed is closed once the lapsed close that lose proposes has
	// committed or failed (lapseErr: why it failed).
	lapsed   chan struct{}
	lapseErr error
}

// NewSession opens a session on the cluster through n and starts keeping it
// alive. It returns once the session is committed (or ctx ends, or the
// cluster cannot commit: an error wrapping ErrNoQuorum). A nil ctx or node,
// a nil option or an option out of range is refused with ErrInvalidArgument.
func NewSession(ctx context.Context, n *node.Node, opts ...SessionOption) (*Session, error) {
	switch {
	case ctx == nil:
		return nil, invalid("nil context")
	case n == nil:
		return nil, invalid("nil node")
	}
	cfg := sessionConfig{ttl: DefaultTTL, owner: n.ID()}
	for i, o := range opts {
		if o == nil {
			return nil, invalid("option %d is nil", i)
		}
		o(&cfg)
	}
	return openSession(ctx, n, cfg)
}

// openSession opens a session with an already-built configuration (also
// used to replace a lost session with an identical one).
func openSession(ctx context.Context, n *node.Node, cfg sessionConfig) (*Session, error) {
	r := replica.Of(n)
	if minTTL := minTTLOf(r.Timeouts()); cfg.ttl < minTTL || cfg.ttl > fsmwire.MaxTTL {
		return nil, invalid("TTL %v outside [%v, %v] (the minimum follows the node's Raft timeouts)", cfg.ttl, minTTL, fsmwire.MaxTTL)
	}
	if cfg.lockDelay < 0 || cfg.lockDelay > fsmwire.MaxLockDelay {
		return nil, invalid("lock-delay %v outside [0, %v]", cfg.lockDelay, fsmwire.MaxLockDelay)
	}
	if err := fsmwire.ValidateDescription(cfg.owner); err != nil {
		return nil, invalid("owner description: %v", err)
	}
	if cfg.logger == nil {
		cfg.logger = r.Logger()
	}
	s := &Session{
		n: n, r: r, cfg: cfg, log: cfg.logger, metrics: cfg.metrics,
		margin:   cfg.ttl / 20, // clock-rate drift and scheduling slack
		stop:     make(chan struct{}),
		lapsed:   make(chan struct{}),
		state:    StateHealthy,
		changed:  make(chan struct{}),
		pending:  make(map[lockinfo.OwnerID]*pending),
		leases:   make(map[lockinfo.OwnerID]*Lease),
		held:     make(map[string][]*Lease),
		releases: make(map[lockinfo.OwnerID]*release),
	}
	sent := time.Now()
	res, err := r.Apply(ctx, fsm.OpenSession{TTL: cfg.ttl, LockDelay: cfg.lockDelay, Description: cfg.owner, Reserved: cfg.reserved})
	if err != nil {
		err = explainFailure(err, nil, ctx.Err() != nil, false, time.Since(sent), electionTimeout(r))
		return nil, fmt.Errorf("lockapi: open session: %w", err)
	}
	if res.Status != fsmwire.StatusOK {
		return nil, fmt.Errorf("lockapi: open session: %w", res.Err())
	}
	s.id = res.Session
	s.validUntil = sent.Add(cfg.ttl - s.margin) // the open counts as the first keepalive
	s.traceOpened(sent)
	if s.sub, err = r.Subscribe(replica.EventFilter{Session: s.id, EarlyGrants: true, OnEarlyGrant: s.earlyGrant}, 256); err != nil {
		return nil, err
	}
	s.ctx, s.cancel = context.WithCancelCause(context.Background())
	s.closing, s.markClosing = context.WithCancel(context.Background())
	s.log = s.log.With("session", uint64(s.id))
	s.wg.Add(2)
	go s.keepAlive()
	go s.watch()
	s.log.Debug("session opened", "ttl", cfg.ttl, "lock_delay", cfg.lockDelay)
	return s, nil
}

// ID returns the session's id in the cluster.
func (s *Session) ID() SessionID { return SessionID(s.id) }

// TTL returns the session's TTL.
func (s *Session) TTL() time.Duration { return s.cfg.ttl }

// Node returns the node the session runs on.
func (s *Session) Node() *node.Node { return s.n }

// Done returns a channel closed when the session is lost or closed.
func (s *Session) Done() <-chan struct{} { return s.ctx.Done() }

// Context returns a context cancelled when the session is lost or closed;
// context.Cause tells why (same as Err).
func (s *Session) Context() context.Context { return s.ctx }

// Err returns nil while the session is open, then why it ended: an error
// wrapping ErrSessionExpired (lost) or ErrSessionClosed. Like Lease.Err it
// checks the deadline itself.
func (s *Session) Err() error {
	s.checkDeadline()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// checkDeadline ends the session at once if its lease deadline has passed,
// without waiting for the watch goroutine to notice.
func (s *Session) checkDeadline() {
	s.mu.Lock()
	over := s.err == nil && !time.Now().Before(s.validUntil)
	s.mu.Unlock()
	if over {
		s.lose(leasetrace.LostDeadline, s.deadlineCause())
	}
}

// deadlineCause is why a session whose lease deadline passed was lost: an
// error wrapping ErrSessionExpired — and ErrNoQuorum if its last keepalive
// failed because the cluster could not confirm it (the usual reason: the
// caller of a call cut short by the loss then learns that there was no
// quorum, not only that its session ended).
func (s *Session) deadlineCause() error {
	s.mu.Lock()
	noQuorum := s.keepaliveErr != nil && errors.Is(s.keepaliveErr, ErrNoQuorum)
	s.mu.Unlock()
	if noQuorum {
		return fmt.Errorf("%w: no keepalive succeeded before the lease deadline: %w", ErrSessionExpired, ErrNoQuorum)
	}
	return fmt.Errorf("%w: no keepalive succeeded before the lease deadline", ErrSessionExpired)
}

// State returns the session's current state.
func (s *Session) State() State {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state
}

// WaitForStateChange waits until the state differs from from, or ctx ends;
// it reports whether the state changed. A nil ctx is a caller's mistake: it
// returns false at once.
func (s *Session) WaitForStateChange(ctx context.Context, from State) bool {
	if ctx == nil {
		return false
	}
	for {
		s.mu.Lock()
		st, ch := s.state, s.changed
		s.mu.Unlock()
		if st != from {
			return true
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		}
	}
}

// ValidUntil returns the client-side deadline of the session's lease: the
// moment it will be lost unless a keepalive succeeds first. Informational —
// a process can pause right after reading it; fence your writes.
func (s *Session) ValidUntil() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.validUntil
}

// setState changes the state (caller holds s.mu) and returns a function that
// notifies the listener (to be called without the lock).
func (s *Session) setState(to State) func() {
	from := s.state
	if from == to {
		return func() {}
	}
	s.state = to
	close(s.changed)
	s.changed = make(chan struct{})
	f := s.cfg.onState
	s.log.Debug("session state", "from", from, "to", to)
	return func() {
		if f != nil {
			f(from, to)
		}
	}
}

// end finishes the session on the client: state, error, every lease, every
// waiter and every release in progress (the session's end releases what it
// holds in the cluster: Close at once, a lost session when the cluster closes
// or expires it). It returns false if the session had already ended.
//
// Background work of the session (s.wg) is only started under s.mu while
// s.err is nil, or by lose for its own clean-up (added here): Close's wait
// for s.wg, which follows end, cannot miss any of it.
func (s *Session) end(state State, cause error) bool {
	s.mu.Lock()
	if s.state == StateLost || s.state == StateClosed {
		s.mu.Unlock()
		return false
	}
	notify := s.setState(state)
	s.err = cause
	leases := s.leases
	pend := s.pending
	s.leases, s.pending = map[lockinfo.OwnerID]*Lease{}, map[lockinfo.OwnerID]*pending{}
	s.held = map[string][]*Lease{}
	for _, r := range s.releases {
		s.finishReleaseLocked(r, 0, 0, cause)
	}
	s.releases, s.settling = map[lockinfo.OwnerID]*release{}, nil
	if state == StateLost {
		s.wg.Add(1) // lose's CloseSession
	}
	s.mu.Unlock()

	s.cancel(cause)
	close(s.stop)
	for _, l := range leases {
		l.end(fmt.Errorf("%w: %w", ErrLeaseLost, cause))
	}
	for _, p := range pend {
		p.fail(cause)
	}
	if state == StateLost {
		s.metrics.sessionLost()
		s.metrics.leasesLost(len(leases))
		s.log.Warn("session lost", "cause", cause, "leases", len(leases))
	}
	notify()
	return true
}

// lose ends the session as lost and, in the background, asks the cluster to
// close it, so that its locks are released as soon as the cluster can commit
// rather than only when the leader expires it. The close is the lapsed form
// (fsm.CloseSession with Lapsed): the session's validity ended without a renewal, so it
// ends as an expiry would end it — each lock it holds exclusively enters its
// lock-delay — whether this close or the leader's expiry commits first.
// (Below cluster version 4 the node writes a plain close: a rolling upgrade
// keeps the previous behaviour, no delay, until the version is raised.)
func (s *Session) lose(why string, cause error) {
	if !s.end(StateLost, cause) {
		return
	}
	s.traceLost(why)
	go func() {
		defer s.wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.ttl)
		defer cancel()
		_, err := s.apply(ctx, fsm.CloseSession{Session: s.id, Lapsed: true})
		if err != nil && !errors.Is(err, node.ErrClosed) {
			s.log.Debug("closing a lost session failed; the leader will expire it", "err", err)
		}
		s.mu.Lock()
		s.lapseErr = err
		s.mu.Unlock()
		close(s.lapsed)
	}()
}

// Abandon ends the session as if its lease had lapsed, for a holder that
// gives up without knowing that the work under its locks has stopped (a
// keeper of leases for clients that stopped renewing them, say). Every lease
// ends (ErrLeaseLost wrapping ErrSessionExpired), pending Lock calls fail,
// and the cluster releases what the session holds as on its expiry, in one
// command: each lock it holds exclusively stays ungranted for the session's
// lock-delay (WithLockDelay); its shared grants and waits end at once.
// Close, by contrast, releases without the delay.
//
// Abandon returns once that command committed, or with an error wrapping
// ErrNoQuorum and ctx's error if it could not commit in time (the leader
// then expires the session, with the same delay). On a session already
// lost it waits for the lost session's own close in the same way; after
// Close it returns an error wrapping ErrSessionClosed. RunSingleton treats
// an abandoned session as lost. A nil ctx is refused with
// ErrInvalidArgument (and abandons nothing).
func (s *Session) Abandon(ctx context.Context) error {
	if err := s.checkCall(ctx); err != nil {
		return err
	}
	s.lose(leasetrace.LostAbandoned, fmt.Errorf("%w: abandoned", ErrSessionExpired))
	if s.State() == StateClosed {
		return fmt.Errorf("lockapi: abandon session: %w", ErrSessionClosed)
	}
	start := time.Now()
	select {
	case <-s.lapsed:
	case <-ctx.Done():
		return fmt.Errorf("lockapi: abandon session: %w", explainFailure(ctx.Err(), nil, true, false, time.Since(start), s.electionTimeout()))
	}
	s.mu.Lock()
	err := s.lapseErr
	s.mu.Unlock()
	if err != nil {
		return fmt.Errorf("lockapi: abandon session: %w", err)
	}
	return nil
}

// Close releases every lock the session holds and every wait it has queued
// (in one command, without lock-delay) and ends the session. Leases end with
// ErrLeaseLost wrapping ErrSessionClosed; pending Lock calls fail. If the
// cluster cannot commit before ctx ends, Close still ends the session locally
// and returns an error wrapping ErrNoQuorum: the leader will expire it after
// its TTL. Safe to call more than once; later calls return the first result.
// A nil ctx is refused with ErrInvalidArgument (and closes nothing).
func (s *Session) Close(ctx context.Context) error {
	if err := s.checkCall(ctx); err != nil {
		return err
	}
	s.closeOnce.Do(func() {
		s.markClosing()
		// A session whose lease has lapsed is lost, not closed: its end has
		// expiry semantics (lose), and the close below is not sent.
		s.checkDeadline()
		wasOpen := s.end(StateClosed, ErrSessionClosed)
		if wasOpen {
			r, err := s.apply(ctx, fsm.CloseSession{Session: s.id})
			switch {
			case err != nil:
				s.closeErr = fmt.Errorf("lockapi: close session: %w", err)
			case r.Status != fsmwire.StatusOK && r.Status != fsmwire.StatusNoSession:
				s.closeErr = fmt.Errorf("lockapi: close session: %w", r.Err())
			}
		}
		s.sub.Close()
		done := make(chan struct{})
		go func() { s.wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
			if s.closeErr == nil {
				s.closeErr = fmt.Errorf("lockapi: close session: %w", ctx.Err())
			}
		}
		s.log.Debug("session closed", "err", s.closeErr)
	})
	return s.closeErr
}
