package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/raftlock/raftlock/lockapi"
	"github.com/raftlock/raftlock/node"
)

// ---- workers ----

type workerState struct {
	id   int
	home int
	node int // the node its session is on
	rng  *rand.Rand
	sess *lockapi.Session
}

func (s *sim) pausedUntil(node int) time.Time {
	if u := s.frozen[node].Load(); u != 0 {
		return time.Unix(0, u)
	}
	return time.Time{}
}

// freezePoint blocks a worker while its process (node) is paused; it
// reports whether it was paused.
func (s *sim) freezePoint(node int) bool {
	paused := false
	for {
		u := s.pausedUntil(node)
		if u.IsZero() || !time.Now().Before(u) {
			return paused
		}
		paused = true
		time.Sleep(time.Until(u))
	}
}

// pick returns the node a worker uses: its home node while that runs, else
// the next running one (members come and go in some classes).
func (s *sim) pick(w *workerState) (int, *node.Node) {
	for k := range len(s.nodes) {
		i := (w.home + k) % len(s.nodes)
		if n := s.nodes[i].Load(); n != nil {
			return i, n
		}
	}
	return -1, nil
}

// errKind classifies a failed call's error (Op.ErrKind).
func errKind(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, lockapi.ErrNoQuorum):
		return ErrNoQuorum
	case errors.Is(err, lockapi.ErrSessionExpired), errors.Is(err, lockapi.ErrSessionClosed), errors.Is(err, lockapi.ErrLeaseLost):
		return ErrSessionExpired
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return ErrDeadline
	}
	return ErrOther
}

func (s *sim) sessionOptions(id int) []lockapi.SessionOption {
	opts := []lockapi.SessionOption{lockapi.WithTTL(s.cfg.TTL), lockapi.WithOwner(fmt.Sprintf("client-%d", id))}
	if s.cfg.LockDelay > 0 {
		opts = append(opts, lockapi.WithLockDelay(s.cfg.LockDelay))
	}
	return opts
}

// worker runs lock / fenced write / unlock cycles on the workload's locks
// until the end of the workload.
func (s *sim) worker(id int) {
	locks := s.lockNames()
	s.runWorker(id, func(w *workerState) { s.cycle(w, locks[w.rng.IntN(len(locks))]) })
}

// runWorker runs step for worker id, on a live session, until the end of
// the workload; the session stays open (the end state is read while it
// lives).
func (s *sim) runWorker(id int, step func(w *workerState)) {
	w := &workerState{id: id, home: id % s.cfg.Nodes, rng: seededRand(s.cfg.Seed, uint64(id)+1)}
	defer func() {
		if w.sess != nil {
			s.mu.Lock()
			s.sessions = append(s.sessions, w.sess)
			s.mu.Unlock()
		}
	}()
	for time.Now().Before(s.end) {
		if !s.session(w) {
			continue
		}
		step(w)
		time.Sleep(time.Duration(w.rng.Int64N(int64(s.cfg.TTL / 8))))
	}
}

// session makes sure worker w has a live session on the node it should
// use (opening a new one if needed); it reports false when there is none
// for now (the worker waited a little and should try again).
func (s *sim) session(w *workerState) bool {
	s.freezePoint(w.home)
	i, n := s.pick(w)
	if n == nil {
		time.Sleep(50 * time.Millisecond)
		return false
	}
	if w.sess != nil && w.sess.Err() == nil && w.sess.Node() == n {
		return true
	}
	if w.sess != nil {
		s.closeSession(w.sess, s.cfg.TTL)
		w.sess = nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*s.cfg.TTL)
	sess, err := lockapi.NewSession(ctx, n, s.sessionOptions(w.id)...)
	cancel()
	if err != nil {
		time.Sleep(time.Duration(w.rng.Int64N(int64(s.cfg.TTL / 4))))
		return false
	}
	w.sess, w.node = sess, i
	if w.id < len(s.current) {
		s.current[w.id].Store(sess)
	}
	if s.cfg.LockDelay > 0 {
		s.addDelaySession(uint64(sess.ID()))
	}
	return true
}

// closeSession closes a client's session, within d. A session still
// healthy is closed voluntarily (History.Closes: its locks are released
// without its lock-delay); a lost one's close has expiry semantics.
func (s *sim) closeSession(sess *lockapi.Session, d time.Duration) {
	if sess.Err() == nil {
		s.mu.Lock()
		s.h.Closes = append(s.h.Closes, SessionClose{Session: uint64(sess.ID()), At: now()})
		s.mu.Unlock()
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	sess.Close(ctx)
	cancel()
}

func (s *sim) lockNames() []string {
	locks := make([]string, s.cfg.Locks)
	for i := range locks {
		locks[i] = fmt.Sprintf("lock-%d", i)
	}
	return locks
}

// cycle is one lock / fenced write / unlock round.
func (s *sim) cycle(w *workerState, lock string) {
	ttl := s.cfg.TTL
	try := w.rng.Float64() < 0.25
	nodeID := s.c.ID(w.node)
	op := Op{Client: w.id, Node: nodeID, Kind: OpAcquire, Lock: lock, Session: uint64(w.sess.ID())}
	if try {
		op.Kind = OpTryAcquire
	}
	timeout := ttl + time.Duration(w.rng.Int64N(int64(2*ttl)))
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	op.Invoke = now()
	op.Deadline = op.Invoke + int64(timeout)
	if !try && w.rng.Float64() < 0.1 {
		// A Lock with no deadline: it must still return once the
		// session ends (ErrSessionExpired), not when quorum comes back.
		// (The harness cancels it a while after the workload's end, so a
		// library that never returns cannot keep the run going.)
		cancel()
		var cctx context.Context
		cctx, cancel = context.WithCancel(context.Background())
		stop := time.AfterFunc(time.Until(s.end)+5*ttl, cancel)
		defer stop.Stop()
		ctx = cctx
		op.Deadline = 0
	}
	lease, idx := s.acquire(w.sess, &op, func() (*lockapi.Lease, error) {
		defer cancel()
		if try {
			return w.sess.TryLock(ctx, lock)
		}
		return w.sess.Lock(ctx, lock)
	})
	if lease == nil {
		return
	}

	// The client's validity window closes when the lease is lost or
	// released, whichever comes first.
	lost := watchLease(lease)

	s.holding[w.id].Store(int32(w.node))
	time.Sleep(time.Duration(w.rng.Int64N(int64(ttl / 3)))) // think: a pause may hit here
	careful := w.rng.Float64() < 0.5
	if w.rng.Float64() < 0.1 { // a slow worker: past its TTL, keepalives still running
		time.Sleep(time.Duration(w.rng.Int64N(int64(3 * ttl / 2))))
	}
	late := s.freezePoint(w.node) // a paused process resumes here, its old token in hand
	s.holding[w.id].Store(-1)
	// A careful worker checks its lease before writing; a paused one had
	// checked before the pause (that is the point of the pause).
	if late || !careful || lease.Err() == nil {
		s.writes(w, op, lock, late)
	}

	s.release(w, op, idx, lease, lost)
}

// release unlocks the lease of the granted acquisition op (History.Ops
// index idx), records the release and closes the grant's validity window:
// at the release call, or where lost says the lease ended before it.
func (s *sim) release(w *workerState, op Op, idx int, lease *lockapi.Lease, lost <-chan int64) {
	ttl := s.cfg.TTL
	rel := Op{Client: w.id, Node: op.Node, Kind: OpRelease, Lock: op.Lock, Token: op.Token, Owner: op.Owner, Session: op.Session, Shared: op.Shared, Permits: op.Permits}
	ctx, cancel := context.WithTimeout(context.Background(), 2*ttl)
	rel.Invoke = now()
	rel.Deadline = rel.Invoke + int64(2*ttl)
	err := lease.Unlock(ctx)
	rel.Return = now()
	cancel()
	switch {
	case err == nil:
		rel.Result = OK
	case errors.Is(err, lockapi.ErrNotHolder):
		rel.Result = NotHolder
	default:
		rel.Result = Unknown
	}
	if err != nil {
		rel.Err, rel.ErrKind = err.Error(), errKind(err)
	}
	k := s.addOp(rel)
	if rel.Result == Unknown {
		// The client has let go; the library must finish the release.
		s.mu.Lock()
		s.givenUp = append(s.givenUp, GivenUp{Owner: op.Owner, Op: s.h.Ops[k].ID, Err: rel.Err})
		s.mu.Unlock()
	}
	at := <-lost
	s.mu.Lock()
	s.h.Ops[idx].ValidTo = min(at, rel.Invoke)
	if at < rel.Invoke {
		s.h.Ops[idx].Lost = at
	}
	s.mu.Unlock()
}

// acquire runs call, an acquisition of sess described by op (invoked
// now), and records it: its outcome, and whether the session ended during
// the call. It returns the lease (nil if none) and the op's index in
// History.Ops; op gets its ID.
func (s *sim) acquire(sess *lockapi.Session, op *Op, call func() (*lockapi.Lease, error)) (*lockapi.Lease, int) {
	sessionEnded := watchSession(sess)
	lease, err := call()
	op.Return = now()
	op.SessionEnded = sessionEnded()
	switch {
	case err == nil:
		op.Result, op.Token, op.Owner = Granted, uint64(lease.Token()), lease.Owner().String()
	case errors.Is(err, lockapi.ErrLocked):
		op.Result = Locked
	default:
		op.Result, op.Err, op.ErrKind = Fail, err.Error(), errKind(err)
	}
	idx := s.addOp(*op)
	s.mu.Lock()
	op.ID = s.h.Ops[idx].ID
	s.mu.Unlock()
	return lease, idx
}

// watchSession notes when sess ends from now on; the returned function
// stops watching and reports that time (0: it has not ended).
func watchSession(sess *lockapi.Session) func() int64 {
	ended := make(chan int64, 1)
	stop := make(chan struct{})
	go func() {
		select {
		case <-sess.Done():
			ended <- now()
		case <-stop:
			ended <- 0
		}
	}()
	return func() int64 {
		close(stop)
		return <-ended
	}
}

// writes performs one or two fenced writes with the lease's token.
func (s *sim) writes(w *workerState, op Op, lock string, late bool) {
	for k := range 1 + w.rng.IntN(2) {
		value := fmt.Sprintf("c%d/op%d/%d", w.id, op.ID, k)
		wr := Write{Client: w.id, Lock: lock, Token: op.Token, Value: value, Late: late, Invoke: now()}
		seq, err := s.reg.Write(lock, op.Token, value)
		wr.Return, wr.Seq = now(), seq
		switch {
		case err == nil:
			wr.Accepted = true
		case IsStale(err):
			wr.Rejected = true
		}
		if err != nil {
			wr.Err = err.Error()
		}
		s.addWrite(wr)
		if err != nil {
			return
		}
		time.Sleep(time.Duration(w.rng.Int64N(int64(s.cfg.TTL / 10))))
	}
}
