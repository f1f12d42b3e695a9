package admin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/textsafe"
	"github.com/raftlock/raftlock/lockapi"
)

// AcquireRequest is the body of POST /v1/acquire. Wait false is TryLock.
// TimeoutMS bounds the call (0: 30 s when waiting; a TryLock answers within
// a few election timeouts anyway).
//
// The lease is client-kept (Session "" or "client"): the acquisition gets
// a session of its own — TTL TTLMS, default the server's (Config.TTL,
// lockapi.DefaultTTL unless set), lock-delay LockDelayMS (at most
// fsm.MaxLockDelay), default the server's (Config.LockDelay), description
// Owner, default "http:<client address>" — and the client keeps it by
// asking about it at least once per TTL: GET /v1/lease, or a loop of GET
// /v1/lease/wait, whose answers renew it (for a client-kept lease a wait
// answers within half the TTL). Unasked, the server releases it as a
// lapse: the lock stays ungranted for the lock-delay. So a client that
// dies, hangs or is cut off holds the lock for at most a TTL. The raftlock
// CLI acquires so.
//
// Session "replica" puts the lease in the server's one shared session
// instead: it is held until released, or until that session is lost (the
// replica stops or is cut off from the cluster) — whatever becomes of the
// client. For holders that cannot renew; TTLMS, LockDelayMS and Owner do
// not apply. A
// waiting acquire of a name the shared session already holds for another
// client waits at the replica, outside the lock's queue, until that lease
// ends (a session never waits for its own grant: lockapi.ErrAlreadyHeld).
//
// Shared asks for a read lock (many readers or one writer: see
// lockapi.Session.RLock); Limit > 0 for Permits (default 1) of the
// counting semaphore Lock of that limit (cluster version 3, both).
type AcquireRequest struct {
	Lock        string `json:"lock"`
	Wait        bool   `json:"wait"`
	TimeoutMS   int64  `json:"timeout_ms"`
	TTLMS       int64  `json:"ttl_ms,omitempty"`
	LockDelayMS int64  `json:"lock_delay_ms,omitempty"`
	Owner       string `json:"owner,omitempty"`
	Session     string `json:"session,omitempty"`

	Shared  bool `json:"shared,omitempty"`
	Limit   int  `json:"limit,omitempty"`
	Permits int  `json:"permits,omitempty"`
}

// The values of AcquireRequest.Session.
const (
	sessionClient  = "client"  // the default: a session of its own, renewed by its client
	sessionReplica = "replica" // the server's shared session
)

// AcquireResponse is the answer of a successful POST /v1/acquire.
// ValidForMS: the lease stays valid at least this long from when the
// answer was sent (its session's validity; for a client-kept lease also
// the time left to ask about it again). A client that counts it from when
// it sent the request never overestimates it. ValidUntilUnixMS is the end
// of that window on the server's wall clock. The server keeps the lease
// held until the window has ended also when it stops gracefully (Close);
// a stopping server reports no window (ValidForMS 0).
type AcquireResponse struct {
	Lock             string `json:"lock"`
	Token            uint64 `json:"token"`
	Handle           string `json:"handle"`
	ValidUntilUnixMS int64  `json:"valid_until_unix_ms"`
	ValidForMS       int64  `json:"valid_for_ms"`
	TTLMS            int64  `json:"ttl_ms"`
	Session          uint64 `json:"session"`
}

// validForMS is the time left until the end of a window, in whole
// milliseconds (rounded down), 0 if it ended.
func validForMS(until time.Time) int64 { return max(time.Until(until).Milliseconds(), 0) }

// ReleaseRequest is the body of POST /v1/release.
type ReleaseRequest struct {
	Handle string `json:"handle"`
}

// LeaseJSON is the answer of GET /v1/lease and /v1/lease/wait (ValidForMS
// as in AcquireResponse; 0 once the lease ended).
type LeaseJSON struct {
	Valid      bool   `json:"valid"`
	Error      string `json:"error,omitempty"` // why the lease ended
	Lock       string `json:"lock"`
	Token      uint64 `json:"token"`
	Handle     string `json:"handle"`
	ValidForMS int64  `json:"valid_for_ms"`
}

const (
	defaultWait = 30 * time.Second // at most Limits.MaxWait (Validate)
	unlockWait  = 10 * time.Second
)

// checkAcquire validates an acquire request and fills in its defaults (a
// semaphore's permits; a client-kept lease's TTL). own: the lease is
// client-kept. It returns a description of the first mistake, "" if none.
func (s *Server) checkAcquire(req *AcquireRequest) (ttl, lockDelay time.Duration, own bool, bad string) {
	if err := fsmwire.ValidateLockName(req.Lock); err != nil {
		return 0, 0, false, "lock: " + public(err.Error())
	}
	if r, at, ok := textsafe.Control(req.Lock); ok {
		return 0, 0, false, fmt.Sprintf("lock %q: control character %U at byte %d (new names may not contain control characters)", req.Lock, r, at)
	}
	if req.TimeoutMS < 0 || req.TimeoutMS > s.limits.MaxWait.Milliseconds() {
		return 0, 0, false, fmt.Sprintf("timeout_ms %d outside [0, %d] (Limits.MaxWait)", req.TimeoutMS, s.limits.MaxWait.Milliseconds())
	}
	if req.Limit != 0 || req.Permits != 0 {
		if req.Shared {
			return 0, 0, false, "shared: a read lock; limit and permits: a semaphore (its permits are shared already): not both"
		}
		if req.Permits == 0 {
			req.Permits = 1
		}
		if err := fsmwire.ValidateSemaphore(req.Limit, req.Permits); err != nil {
			return 0, 0, false, public(err.Error())
		}
	}
	switch req.Session {
	case "", sessionClient:
	case sessionReplica:
		if req.TTLMS != 0 || req.LockDelayMS != 0 || req.Owner != "" {
			return 0, 0, false, `ttl_ms, lock_delay_ms and owner are a client-kept lease's; "session":"replica" holds the lease in the replica's session, of the server's TTL, lock-delay and description`
		}
		return 0, 0, false, ""
	default:
		return 0, 0, false, fmt.Sprintf(`session %q: want "client" (the default: a lease of its own that the client renews) or "replica" (the replica's session: held until released or the replica is lost)`, req.Session)
	}
	ttl = s.sess.ttl // Config.TTL, at least the minimum (New)
	if req.TTLMS != 0 {
		min := lockapi.MinTTL(s.n)
		if req.TTLMS < 0 || req.TTLMS > fsmwire.MaxTTL.Milliseconds() || time.Duration(req.TTLMS)*time.Millisecond < min {
			return 0, 0, false, fmt.Sprintf("ttl_ms %d outside [%d, %d] (the cluster's timing sets the minimum)", req.TTLMS, (min + time.Millisecond - 1).Milliseconds(), fsmwire.MaxTTL.Milliseconds())
		}
		ttl = time.Duration(req.TTLMS) * time.Millisecond
	}
	lockDelay = s.sess.lockDelay // Config.LockDelay
	if req.LockDelayMS != 0 {
		if req.LockDelayMS < 0 || req.LockDelayMS > fsmwire.MaxLockDelay.Milliseconds() {
			return 0, 0, false, fmt.Sprintf("lock_delay_ms %d outside [0, %d]", req.LockDelayMS, fsmwire.MaxLockDelay.Milliseconds())
		}
		lockDelay = time.Duration(req.LockDelayMS) * time.Millisecond
	}
	if err := fsmwire.ValidateDescription(req.Owner); err != nil {
		return 0, 0, false, "owner: " + public(err.Error())
	}
	return ttl, lockDelay, true, ""
}

func (s *Server) acquire(w http.ResponseWriter, r *http.Request) {
	var req AcquireRequest
	if !s.decode(w, r, &req) {
		return
	}
	ttl, lockDelay, own, bad := s.checkAcquire(&req)
	if bad != "" {
		writeBad(w, bad)
		return
	}
	client := quotaClientOf(r)
	if req.Wait {
		if err := s.quotas.beginPoll(client); err != nil {
			writeErr(w, err)
			return
		}
		defer s.quotas.endPoll(client)
	}
	if err := s.quotas.begin(client); err != nil {
		writeErr(w, err)
		return
	}
	counted := true // until the call ends: then either nothing, or a lease held
	endCall := func(granted bool) {
		if counted {
			counted = false
			s.quotas.end(client, granted)
		}
	}
	defer endCall(false)

	ctx := r.Context()
	timeout := time.Duration(req.TimeoutMS) * time.Millisecond
	if timeout == 0 && req.Wait {
		timeout = defaultWait
	}
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
		s.LongPoll(w, timeout)
	}
	// A TryLock answers promptly, the opening of the session included.
	sctx := ctx
	if !req.Wait {
		var cancel context.CancelFunc
		sctx, cancel = context.WithTimeout(ctx, lockapi.TryTimeout(s.n))
		defer cancel()
	}
	sess, err := s.acquireSession(sctx, own, ttl, lockDelay, req.Owner, clientOf(r))
	if err != nil {
		writeErr(w, err)
		return
	}
	var lease *lockapi.Lease
	if own {
		lease, err = acquireIn(ctx, sess, req)
	} else {
		lease, err = s.acquireInReplicaSession(ctx, sess, req)
	}
	if err != nil {
		if own {
			s.closeInBackground(sess)
		}
		writeErr(w, err)
		return
	}
	if r.Context().Err() != nil {
		// The client is gone: nobody will ever release this lease.
		s.unlockInBackground(lease, own)
		return
	}
	endCall(true)
	context.AfterFunc(lease.Context(), func() { s.quotas.released(client) })
	h := s.handles.add(lease, 2*s.limits.MaxAcquisitions, own, ttl)
	_, until := s.handles.get(h)
	writeJSON(w, http.StatusOK, AcquireResponse{
		Lock: req.Lock, Token: lease.Token(), Handle: h,
		ValidUntilUnixMS: until.UnixMilli(), ValidForMS: validForMS(until), TTLMS: sess.TTL().Milliseconds(),
		Session: uint64(sess.ID()),
	})
}

// acquireIn makes the acquisition req asks for in sess: a lock, a read
// lock or permits of a semaphore; waiting, or a try.
func acquireIn(ctx context.Context, sess *lockapi.Session, req AcquireRequest) (*lockapi.Lease, error) {
	sem := lockapi.Semaphore{Name: req.Lock, Limit: req.Limit}
	switch {
	case req.Limit > 0 && req.Wait:
		return sess.Acquire(ctx, sem, req.Permits)
	case req.Limit > 0:
		return sess.TryAcquire(ctx, sem, req.Permits)
	case req.Shared && req.Wait:
		return sess.RLock(ctx, req.Lock)
	case req.Shared:
		return sess.TryRLock(ctx, req.Lock)
	case req.Wait:
		return sess.Lock(ctx, req.Lock)
	}
	return sess.TryLock(ctx, req.Lock)
}

// acquireInReplicaSession makes the acquisition in the shared session,
// whose leases belong to many clients: where the session already holds
// the name for another client (lockapi.ErrAlreadyHeld), a try answers that
// the lock is held, as to anyone, and a wait waits here until one of the
// shared session's leases of the name ends (or a lease is added, which may
// be the one in the way), then asks again.
func (s *Server) acquireInReplicaSession(ctx context.Context, sess *lockapi.Session, req AcquireRequest) (*lockapi.Lease, error) {
	for {
		added := s.handles.addedSignal()
		lease, err := acquireIn(ctx, sess, req)
		if !errors.Is(err, lockapi.ErrAlreadyHeld) {
			return lease, err
		}
		if !req.Wait {
			li, _ := s.n.Lock(req.Lock)
			return nil, &lockapi.LockedError{Lock: req.Lock, Holder: apiHolder(li.Holder), DelayUntil: li.DelayUntil, Free: max(li.Limit-li.Used, 0)}
		}
		if err := s.handles.waitLeaseEnds(ctx, sess, req.Lock, added); err != nil {
			return nil, fmt.Errorf("admin: lock %q: held in the replica's session for another client: %w", req.Lock, err)
		}
	}
}

// acquireSession returns the session an acquisition goes into: the shared
// one, or a new one of its own.
func (s *Server) acquireSession(ctx context.Context, own bool, ttl, lockDelay time.Duration, owner, client string) (*lockapi.Session, error) {
	if !own {
		return s.sess.Get(ctx)
	}
	if owner == "" {
		owner = "http:" + client
	}
	return lockapi.NewSession(ctx, s.n, lockapi.WithTTL(ttl), lockapi.WithLockDelay(lockDelay), lockapi.WithOwner(owner), lockapi.WithLogger(s.log))
}

func (s *Server) unlockInBackground(l *lockapi.Lease, closeSession bool) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), unlockWait)
		defer cancel()
		l.Unlock(ctx)
		if closeSession {
			l.Session().Close(ctx)
		}
	}()
}

func (s *Server) closeInBackground(sess *lockapi.Session) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), unlockWait)
		defer cancel()
		sess.Close(ctx)
	}()
}

func (s *Server) release(w http.ResponseWriter, r *http.Request) {
	var req ReleaseRequest
	if !s.decode(w, r, &req) {
		return
	}
	if req.Handle == "" {
		writeBad(w, "handle: required (the handle an acquire answered)")
		return
	}
	l := s.handles.lookup(req.Handle)
	if l == nil {
		writeJSON(w, http.StatusNotFound, ErrorJSON{Error: ErrKindUnknownHandle, Detail: "no lease with this handle (released, or forgotten)"})
		return
	}
	if lost := l.Err(); errors.Is(lost, lockapi.ErrLeaseLost) {
		// The lease ended before the release: report it at once, and let the
		// session still ask the cluster to release it (in case it holds it).
		s.handles.remove(req.Handle)
		s.unlockInBackground(l, false)
		writeJSON(w, http.StatusConflict, ErrorJSON{Error: ErrKindNotHolder, Detail: public(lost.Error())})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), unlockWait)
	defer cancel()
	var err error
	if s.handles.kept(req.Handle) > 0 {
		// A client-kept lease is its session's only grant: closing the
		// session releases it in one command. (An Unlock ends the lease,
		// which starts that close anyway, and the two raced: the release
		// failed with "session closed" while the lock stayed held until
		// the close committed.)
		err = l.Session().Close(ctx)
	} else {
		err = l.Unlock(ctx)
	}
	switch {
	case err == nil:
		s.handles.remove(req.Handle)
		writeJSON(w, http.StatusOK, map[string]bool{"released": true})
	case errors.Is(err, lockapi.ErrNotHolder):
		s.handles.remove(req.Handle)
		writeErr(w, err)
	default:
		writeErr(w, err) // no quorum: the handle stays, the client may retry
	}
}

func (s *Server) leaseFor(w http.ResponseWriter, r *http.Request) (*lockapi.Lease, string) {
	h := r.URL.Query().Get("handle")
	if h == "" {
		writeBad(w, "handle: required")
		return nil, h
	}
	l := s.handles.lookup(h)
	if l == nil {
		writeJSON(w, http.StatusNotFound, ErrorJSON{Error: ErrKindUnknownHandle, Detail: "no lease with this handle (released, or forgotten)"})
	}
	return l, h
}

// leaseJSON describes the lease of handle h (asking about it renews a
// client-kept lease).
func (s *Server) leaseJSON(l *lockapi.Lease, h string) LeaseJSON {
	_, until := s.handles.get(h)
	out := LeaseJSON{Valid: true, Lock: l.Name(), Token: l.Token(), Handle: h, ValidForMS: validForMS(until)}
	if err := l.Err(); err != nil {
		out.Valid, out.Error, out.ValidForMS = false, public(err.Error()), 0
	}
	return out
}

func (s *Server) lease(w http.ResponseWriter, r *http.Request) {
	if l, h := s.leaseFor(w, r); l != nil {
		writeJSON(w, http.StatusOK, s.leaseJSON(l, h))
	}
}

// leaseWait long-polls until the lease ends or timeout_ms (default 30 s,
// at most Limits.MaxWait: a longer one is shortened) passes; the body tells
// which. For a client-kept lease the wait is at most half its TTL: the
// answer renews the lease, so a client that keeps asking again keeps it.
// It counts as a long poll of its client (Limits.MaxPollsPerClient).
func (s *Server) leaseWait(w http.ResponseWriter, r *http.Request) {
	timeout := defaultWait
	if v := r.URL.Query().Get("timeout_ms"); v != "" {
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil || ms < 0 {
			writeBad(w, "timeout_ms: want a non-negative integer")
			return
		}
		timeout = time.Duration(min(ms, s.limits.MaxWait.Milliseconds())) * time.Millisecond
	}
	l, h := s.leaseFor(w, r)
	if l == nil {
		return
	}
	if ttl := s.handles.kept(h); ttl > 0 {
		timeout = min(timeout, ttl/2)
	}
	client := quotaClientOf(r)
	if err := s.quotas.beginPoll(client); err != nil {
		writeErr(w, err)
		return
	}
	defer s.quotas.endPoll(client)
	s.LongPoll(w, timeout)
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-l.Done():
	case <-t.C:
	case <-r.Context().Done():
		return
	}
	writeJSON(w, http.StatusOK, s.leaseJSON(l, h))
}
