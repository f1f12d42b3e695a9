package lockhttp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/lockapi"
	"github.com/raftlock/raftlock/node"
)

// HolderJSON describes a lock's holder.
type HolderJSON struct {
	Session          uint64 `json:"session"`
	Description      string `json:"description"`
	Token            uint64 `json:"token"`
	AcquiredAtUnixMS int64  `json:"acquired_at_unix_ms"`
}

// WaiterJSON describes one entry of a lock's FIFO queue.
type WaiterJSON struct {
	Session          uint64 `json:"session"`
	Description      string `json:"description,omitempty"`
	EnqueuedAtUnixMS int64  `json:"enqueued_at_unix_ms"`
}

// LockJSON describes a lock (GET /v1/locks/{name}). Waiters lists the
// first waiters of the queue (at most ?waiters=, see Limits.MaxListedWaiters);
// WaiterCount is the length of the whole queue.
type LockJSON struct {
	Name             string       `json:"name"`
	Held             bool         `json:"held"`
	Holder           *HolderJSON  `json:"holder"`
	Waiters          []WaiterJSON `json:"waiters"`
	WaiterCount      int          `json:"waiter_count"`
	DelayUntilUnixMS int64        `json:"delay_until_unix_ms,omitempty"`
}

// ErrorJSON is the body of every error answer.
type ErrorJSON struct {
	Error            string      `json:"error"`            // machine-readable kind
	Detail           string      `json:"detail,omitempty"` // the Go error
	Holder           *HolderJSON `json:"holder,omitempty"` // "locked": who holds it
	DelayUntilUnixMS int64       `json:"delay_until_unix_ms,omitempty"`
}

// Error kinds.
const (
	ErrKindBadRequest     = "bad_request"
	ErrKindLocked         = "locked"
	ErrKindNoQuorum       = "no_quorum"
	ErrKindTimeout        = "timeout"
	ErrKindNotHolder      = "not_holder"
	ErrKindUnknownHandle  = "unknown_handle"
	ErrKindSessionExpired = "session_expired"
	ErrKindClosed         = "closed"
	ErrKindCanceled       = "canceled"
	ErrKindTooLarge       = "too_large"    // 413: the body is over Limits.MaxBodyBytes
	ErrKindClientQuota    = "client_quota" // 429: a per-client or server quota of Limits
	ErrKindQuota          = "quota"        // 429: a cluster quota (fsm.Limits) refused the command
	ErrKindInternal       = "internal"
)

func holderJSON(h fsm.Holder) *HolderJSON {
	if h.Session == 0 {
		return nil
	}
	return &HolderJSON{Session: uint64(h.Session), Description: h.Description, Token: uint64(h.Token), AcquiredAtUnixMS: nsToMS(h.AcquiredAt)}
}

// descriptions caches session descriptions for one answer: a queue is
// mostly a few sessions waiting many times, and each lookup takes the
// FSM's read lock.
type descriptions map[fsm.SessionID]string

func (s *Server) describe(d descriptions, id fsm.SessionID) string {
	desc, ok := d[id]
	if !ok {
		if si, found := s.n.Session(id); found {
			desc = si.Description
		}
		d[id] = desc
	}
	return desc
}

// lockJSON describes li with at most maxWaiters of its waiters: linear in
// what it lists.
func (s *Server) lockJSON(li fsm.LockInfo, maxWaiters int, d descriptions) LockJSON {
	out := LockJSON{Name: li.Name, Held: li.Held, Waiters: []WaiterJSON{}, WaiterCount: len(li.Waiters), DelayUntilUnixMS: nsToMS(li.DelayUntil)}
	if li.Held {
		out.Holder = holderJSON(li.Holder)
	}
	for _, w := range li.Waiters[:min(len(li.Waiters), maxWaiters)] {
		out.Waiters = append(out.Waiters, WaiterJSON{
			Session: uint64(w.Session), Description: s.describe(d, w.Session), EnqueuedAtUnixMS: nsToMS(w.EnqueuedAt),
		})
	}
	return out
}

func nsToMS(ns int64) int64 {
	if ns == 0 {
		return 0
	}
	return time.Unix(0, ns).UnixMilli()
}

// classify maps an error of lockapi or node to an HTTP status and a body.
func classify(err error) (int, ErrorJSON) {
	body := ErrorJSON{Detail: err.Error()}
	var locked *lockapi.LockedError
	var quota *quotaError
	switch {
	case errors.As(err, &quota):
		body.Error = ErrKindClientQuota
		return http.StatusTooManyRequests, body
	case errors.Is(err, lockapi.ErrQuota):
		body.Error = ErrKindQuota
		return http.StatusTooManyRequests, body
	case errors.As(err, &locked):
		body.Error, body.Holder, body.DelayUntilUnixMS = ErrKindLocked, holderJSON(locked.Holder), nsToMS(locked.DelayUntil)
		return http.StatusConflict, body
	case errors.Is(err, lockapi.ErrInvalidArgument), errors.Is(err, node.ErrInvalidArgument):
		body.Error = ErrKindBadRequest
		return http.StatusBadRequest, body
	case errors.Is(err, lockapi.ErrNotHolder):
		body.Error = ErrKindNotHolder
		return http.StatusConflict, body
	case errors.Is(err, lockapi.ErrNoQuorum):
		body.Error = ErrKindNoQuorum
		return http.StatusServiceUnavailable, body
	case errors.Is(err, context.DeadlineExceeded):
		body.Error = ErrKindTimeout
		return http.StatusGatewayTimeout, body
	case errors.Is(err, lockapi.ErrSessionExpired):
		body.Error = ErrKindSessionExpired
		return http.StatusServiceUnavailable, body
	case errors.Is(err, node.ErrClosed), errors.Is(err, lockapi.ErrSessionClosed), errors.Is(err, errClosed):
		body.Error = ErrKindClosed
		return http.StatusServiceUnavailable, body
	case errors.Is(err, context.Canceled):
		body.Error = ErrKindCanceled
		return http.StatusServiceUnavailable, body
	}
	body.Error = ErrKindInternal
	return http.StatusInternalServerError, body
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.Encode(v)
}

func writeErr(w http.ResponseWriter, err error) {
	code, body := classify(err)
	writeJSON(w, code, body)
}

func writeBad(w http.ResponseWriter, detail string) {
	writeJSON(w, http.StatusBadRequest, ErrorJSON{Error: ErrKindBadRequest, Detail: detail})
}

// decode reads the request's JSON body into v: one object with known
// fields only, at most Limits.MaxBodyBytes. It reports false after
// answering 413 or 400.
func (s *Server) decode(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, s.limits.MaxBodyBytes))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		if _, extra := dec.Token(); extra != io.EOF {
			err = errors.New("data after the JSON object")
		}
	}
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		writeJSON(w, http.StatusRequestEntityTooLarge, ErrorJSON{Error: ErrKindTooLarge, Detail: fmt.Sprintf("body over %d bytes", tooLarge.Limit)})
		return false
	case err != nil:
		writeBad(w, "body: "+err.Error())
		return false
	}
	return true
}
