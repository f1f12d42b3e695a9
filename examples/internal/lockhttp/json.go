package lockhttp

import (
	"context"
	"encoding/json"
	"errors"
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

// LockJSON describes a lock (GET /v1/locks/{name}).
type LockJSON struct {
	Name             string       `json:"name"`
	Held             bool         `json:"held"`
	Holder           *HolderJSON  `json:"holder"`
	Waiters          []WaiterJSON `json:"waiters"`
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
	ErrKindInternal       = "internal"
)

func holderJSON(h fsm.Holder) *HolderJSON {
	if h.Session == 0 {
		return nil
	}
	return &HolderJSON{Session: uint64(h.Session), Description: h.Description, Token: uint64(h.Token), AcquiredAtUnixMS: nsToMS(h.AcquiredAt)}
}

func (s *Server) lockJSON(li fsm.LockInfo) LockJSON {
	out := LockJSON{Name: li.Name, Held: li.Held, Waiters: []WaiterJSON{}, DelayUntilUnixMS: nsToMS(li.DelayUntil)}
	if li.Held {
		out.Holder = holderJSON(li.Holder)
	}
	for _, w := range li.Waiters {
		wj := WaiterJSON{Session: uint64(w.Session), EnqueuedAtUnixMS: nsToMS(w.EnqueuedAt)}
		if si, ok := s.n.Session(w.Session); ok {
			wj.Description = si.Description
		}
		out.Waiters = append(out.Waiters, wj)
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
	switch {
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

// decode reads a JSON body of at most 64 KiB into v.
func decode(r *http.Request, v any) error {
	dec := json.NewDecoder(io.LimitReader(r.Body, 64<<10))
	if err := dec.Decode(v); err != nil {
		return err
	}
	return nil
}
