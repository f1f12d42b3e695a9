package admin

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/lockapi"
	"github.com/raftlock/raftlock/node"
)

// ErrorJSON is the body of every error answer.
type ErrorJSON struct {
	Error            string      `json:"error"`            // machine-readable kind
	Detail           string      `json:"detail,omitempty"` // for people
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
	ErrKindClientQuota    = "client_quota" // 429: a per-client or server quota of Limits (acquisitions, long polls)
	ErrKindQuota          = "quota"        // 429: a cluster quota (fsm.Limits) refused the command
	ErrKindFairShare      = "fair_share"   // 429: this node's (or session's) fair share of a cluster quota is used up
	ErrKindInternal       = "internal"
	ErrKindNotFound       = "not_found"          // 404: no such path, session or handle
	ErrKindMethod         = "method_not_allowed" // 405 (the Allow header lists the methods)
	ErrKindUnauthorized   = "unauthorized"       // 401: no or unknown credentials
	ErrKindForbidden      = "forbidden"          // 403: the caller's role does not allow it, or a browser request another site caused (see the package doc)
	ErrKindNotReady       = "not_ready"          // 503: no leader known or not caught up: the local view is unknown
	ErrKindNotHeld        = "not_held"           // 409: revoke: no such grant holds the lock
	ErrKindRefused        = "refused"            // 409: the leader refused an admin operation
	ErrKindBadSnapshot    = "bad_snapshot"       // 400: restore: not a backup this binary reads
	ErrKindNotRemoved     = "not_removed"        // 504: remove-peer: still a server when the call ended
	ErrKindConflict       = "conflict"           // 409: the name is in use as another kind or semaphore limit
	ErrKindNotConfigured  = "not_configured"     // 501: the route needs configuration the server lacks (/metrics without Config.Gatherer)
)

// internalPrefixes are the package prefixes of Go errors ("node: ..."):
// answers do not show them (they name the library's internals, not what
// the caller did).
var internalPrefixes = []string{"node: ", "lockapi: ", "fsm: ", "transport: ", "admin: ", "fence: "}

// public returns an error message without the internal package prefixes.
func public(msg string) string {
	for _, p := range internalPrefixes {
		msg = strings.ReplaceAll(msg, p, "")
	}
	return msg
}

// classify maps an error of lockapi or node to an HTTP status and a body.
func classify(err error) (int, ErrorJSON) {
	body := ErrorJSON{Detail: public(err.Error())}
	var locked *lockapi.LockedError
	var quota *quotaError
	switch {
	case errors.As(err, &quota):
		body.Error = ErrKindClientQuota
		return http.StatusTooManyRequests, body
	case errors.Is(err, lockapi.ErrFairShare):
		body.Error = ErrKindFairShare
		return http.StatusTooManyRequests, body
	case errors.Is(err, lockapi.ErrQuota):
		body.Error = ErrKindQuota
		return http.StatusTooManyRequests, body
	case errors.As(err, &locked):
		body.Error, body.Holder, body.DelayUntilUnixMS = ErrKindLocked, holderJSON(locked.Holder), nsToMS(locked.DelayUntil)
		return http.StatusConflict, body
	case errors.Is(err, lockapi.ErrAlreadyHeld): // the replica's session holds it for another client
		body.Error = ErrKindLocked
		return http.StatusConflict, body
	case errors.Is(err, lockapi.ErrConflict):
		body.Error = ErrKindConflict
		return http.StatusConflict, body
	case errors.Is(err, node.ErrNotHeld):
		body.Error = ErrKindNotHeld
		return http.StatusConflict, body
	case errors.Is(err, node.ErrNoSuchSession):
		body.Error = ErrKindNotFound
		return http.StatusNotFound, body
	case errors.Is(err, node.ErrRefused):
		body.Error = ErrKindRefused
		return http.StatusConflict, body
	case errors.Is(err, node.ErrPeerStays):
		body.Error = ErrKindNotRemoved
		return http.StatusGatewayTimeout, body
	case errors.Is(err, fsmwire.ErrInvalidSnapshot):
		body.Error = ErrKindBadSnapshot
		return http.StatusBadRequest, body
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
