package lockhttp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/lockapi"
)

// AcquireRequest is the body of POST /v1/acquire. Wait false is TryLock.
// TimeoutMS bounds the call (0: 30 s when waiting; a TryLock answers within a
// few election timeouts anyway).
type AcquireRequest struct {
	Lock      string `json:"lock"`
	Wait      bool   `json:"wait"`
	TimeoutMS int64  `json:"timeout_ms"`
}

// AcquireResponse is the answer of a successful POST /v1/acquire.
type AcquireResponse struct {
	Lock             string `json:"lock"`
	Token            uint64 `json:"token"`
	Handle           string `json:"handle"`
	ValidUntilUnixMS int64  `json:"valid_until_unix_ms"`
	Session          uint64 `json:"session"`
}

// ReleaseRequest is the body of POST /v1/release.
type ReleaseRequest struct {
	Handle string `json:"handle"`
}

// LeaseJSON is the answer of GET /v1/lease and /v1/lease/wait.
type LeaseJSON struct {
	Valid  bool   `json:"valid"`
	Error  string `json:"error,omitempty"` // why the lease ended
	Lock   string `json:"lock"`
	Token  uint64 `json:"token"`
	Handle string `json:"handle"`
}

const (
	defaultWait = 30 * time.Second
	maxWait     = time.Hour
	unlockWait  = 10 * time.Second
)

func (s *Server) acquire(w http.ResponseWriter, r *http.Request) {
	var req AcquireRequest
	if !s.decode(w, r, &req) {
		return
	}
	if err := fsm.ValidateLockName(req.Lock); err != nil {
		writeBad(w, "lock: "+err.Error())
		return
	}
	if req.TimeoutMS < 0 || time.Duration(req.TimeoutMS)*time.Millisecond > maxWait {
		writeBad(w, fmt.Sprintf("timeout_ms %d outside [0, %d]", req.TimeoutMS, maxWait.Milliseconds()))
		return
	}
	client := clientOf(r)
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
	sess, err := s.sess.Get(sctx)
	if err != nil {
		writeErr(w, err)
		return
	}
	var lease *lockapi.Lease
	if req.Wait {
		lease, err = sess.Lock(ctx, req.Lock)
	} else {
		lease, err = sess.TryLock(ctx, req.Lock)
	}
	if err != nil {
		writeErr(w, err)
		return
	}
	if r.Context().Err() != nil {
		// The client is gone: nobody will ever release this lease.
		s.unlockInBackground(lease)
		return
	}
	endCall(true)
	context.AfterFunc(lease.Context(), func() { s.quotas.released(client) })
	h := s.handles.add(lease, 2*s.limits.MaxAcquisitions)
	writeJSON(w, http.StatusOK, AcquireResponse{
		Lock: req.Lock, Token: uint64(lease.Token()), Handle: h,
		ValidUntilUnixMS: sess.ValidUntil().UnixMilli(), Session: uint64(sess.ID()),
	})
}

func (s *Server) unlockInBackground(l *lockapi.Lease) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), unlockWait)
		defer cancel()
		l.Unlock(ctx)
	}()
}

func (s *Server) release(w http.ResponseWriter, r *http.Request) {
	var req ReleaseRequest
	if !s.decode(w, r, &req) {
		return
	}
	l := s.handles.get(req.Handle)
	if l == nil {
		writeJSON(w, http.StatusNotFound, ErrorJSON{Error: ErrKindUnknownHandle, Detail: "no lease with this handle (released, or forgotten)"})
		return
	}
	if lost := l.Err(); errors.Is(lost, lockapi.ErrLeaseLost) {
		// The lease ended before the release: report it at once, and let the
		// session still ask the cluster to release it (in case it holds it).
		s.handles.remove(req.Handle)
		s.unlockInBackground(l)
		writeJSON(w, http.StatusConflict, ErrorJSON{Error: ErrKindNotHolder, Detail: lost.Error()})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), unlockWait)
	defer cancel()
	err := l.Unlock(ctx)
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
	l := s.handles.get(h)
	if l == nil {
		writeJSON(w, http.StatusNotFound, ErrorJSON{Error: ErrKindUnknownHandle, Detail: "no lease with this handle (released, or forgotten)"})
	}
	return l, h
}

func leaseJSON(l *lockapi.Lease, h string) LeaseJSON {
	out := LeaseJSON{Valid: true, Lock: l.Name(), Token: uint64(l.Token()), Handle: h}
	if err := l.Err(); err != nil {
		out.Valid, out.Error = false, err.Error()
	}
	return out
}

func (s *Server) lease(w http.ResponseWriter, r *http.Request) {
	if l, h := s.leaseFor(w, r); l != nil {
		writeJSON(w, http.StatusOK, leaseJSON(l, h))
	}
}

// leaseWait long-polls until the lease ends or timeout_ms (default 30 s)
// passes; the body tells which.
func (s *Server) leaseWait(w http.ResponseWriter, r *http.Request) {
	timeout := defaultWait
	if v := r.URL.Query().Get("timeout_ms"); v != "" {
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil || ms < 0 || time.Duration(ms)*time.Millisecond > maxWait {
			writeBad(w, "timeout_ms: want an integer in [0, 3600000]")
			return
		}
		timeout = time.Duration(ms) * time.Millisecond
	}
	l, h := s.leaseFor(w, r)
	if l == nil {
		return
	}
	s.LongPoll(w, timeout)
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-l.Done():
	case <-t.C:
	case <-r.Context().Done():
		return
	}
	writeJSON(w, http.StatusOK, leaseJSON(l, h))
}

// syncIf runs a linearizable read barrier when the request asks for one
// (?sync=1); it reports false after answering with the error.
func (s *Server) syncIf(w http.ResponseWriter, r *http.Request) bool {
	if v := r.URL.Query().Get("sync"); v == "" || v == "0" || v == "false" {
		return true
	}
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	if err := s.n.Sync(ctx); err != nil {
		writeErr(w, err)
		return false
	}
	return true
}

// listParam reads a positive integer query parameter at most max (absent:
// def); it reports false after answering 400.
func listParam(w http.ResponseWriter, r *http.Request, name string, def, max int) (int, bool) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, true
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > max {
		writeBad(w, fmt.Sprintf("%s: want an integer in [1, %d]", name, max))
		return 0, false
	}
	return n, true
}

func (s *Server) lock(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if err := fsm.ValidateLockName(name); err != nil {
		writeBad(w, "lock: "+err.Error())
		return
	}
	waiters, ok := listParam(w, r, "waiters", s.limits.MaxListedWaiters, s.limits.MaxListedWaiters)
	if !ok || !s.syncIf(w, r) {
		return
	}
	li, ok := s.n.Lock(name)
	if !ok {
		li = fsm.LockInfo{Name: name}
	}
	writeJSON(w, http.StatusOK, s.lockJSON(li, waiters, descriptions{}))
}

func (s *Server) locks(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit, ok := listParam(w, r, "limit", s.limits.MaxListedLocks, s.limits.MaxListedLocks)
	if !ok {
		return
	}
	waiters, ok := listParam(w, r, "waiters", s.limits.MaxListedWaiters, s.limits.MaxListedWaiters)
	if !ok || !s.syncIf(w, r) {
		return
	}
	out := struct {
		Locks []LockJSON `json:"locks"`
	}{Locks: []LockJSON{}}
	desc := descriptions{}
	for _, li := range s.n.Locks(q.Get("prefix"), limit) {
		out.Locks = append(out.Locks, s.lockJSON(li, waiters, desc))
	}
	writeJSON(w, http.StatusOK, out)
}
