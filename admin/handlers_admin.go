package admin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/lockinfo"
)

// RevokeRequest is the body of POST /v1/admin/revoke: force-release one
// grant of lock — the one with Token: the exclusive holder, or (cluster
// version 4) a reader or a semaphore's permit holder; Token 0: the lock's
// one grant (400 if several readers or permit holders share it). Why is
// logged and written into the log entry with the caller's name.
type RevokeRequest struct {
	Lock  string `json:"lock"`
	Token uint64 `json:"token,omitempty"`
	Why   string `json:"why"`
}

// RevokeResponse is the answer of a revoke: the grant that ended, and its
// kind ("exclusive", "read" or "permits").
type RevokeResponse struct {
	Lock   string     `json:"lock"`
	Kind   string     `json:"kind"`
	Holder HolderJSON `json:"holder"`
	Index  uint64     `json:"index"`
	By     string     `json:"by"`
}

// grantKind names the kind of a grant for RevokeResponse.
func grantKind(h lockinfo.Holder) string {
	switch {
	case h.Permits > 0:
		return "permits"
	case h.Shared:
		return "read"
	}
	return "exclusive"
}

// EndSessionRequest is the body of POST /v1/admin/end-session.
type EndSessionRequest struct {
	Session uint64 `json:"session"`
	Why     string `json:"why"`
}

// RemovePeerRequest is the body of POST /v1/admin/remove-peer: remove the
// dead server NodeID (see node.Operator.RemovePeer), waiting up to TimeoutMS
// (default 30 s).
type RemovePeerRequest struct {
	NodeID    string `json:"node_id"`
	TimeoutMS int64  `json:"timeout_ms,omitempty"`
}

// TransferRequest is the body of POST /v1/admin/transfer-leadership: to a
// voter's node id ("" lets Raft pick), waiting up to TimeoutMS (default
// 10 s).
type TransferRequest struct {
	To        string `json:"to"`
	TimeoutMS int64  `json:"timeout_ms,omitempty"`
}

// RestoreResponse is the answer of POST /v1/admin/snapshot (a restore).
type RestoreResponse struct {
	Sessions        int    `json:"sessions"`
	Locks           int    `json:"locks"`
	Held            int    `json:"held"`
	Waiters         int    `json:"waiters"`
	LastToken       uint64 `json:"last_token"`
	BackupLastToken uint64 `json:"backup_last_token"`
	BackupIndex     uint64 `json:"backup_index"`
	SessionOffset   uint64 `json:"session_offset"`
}

// adminWait bounds the admin operations that wait (a removal, a transfer)
// and the transfer of a snapshot.
const adminWait = 5 * time.Minute

// opTimeout reads a request's timeout_ms (def when 0).
func opTimeout(w http.ResponseWriter, ms int64, def time.Duration) (time.Duration, bool) {
	d := time.Duration(ms) * time.Millisecond
	switch {
	case ms < 0 || d > adminWait:
		writeBad(w, fmt.Sprintf("timeout_ms %d outside [0, %d]", ms, adminWait.Milliseconds()))
		return 0, false
	case ms == 0:
		return def, true
	}
	return d, true
}

func (s *Server) revoke(w http.ResponseWriter, r *http.Request) {
	var req RevokeRequest
	if !s.decode(w, r, &req) {
		return
	}
	if err := fsmwire.ValidateLockName(req.Lock); err != nil {
		writeBad(w, "lock: "+public(err.Error()))
		return
	}
	by := PrincipalOf(r).Name
	ctx, cancel := context.WithTimeout(r.Context(), unlockWait)
	defer cancel()
	rv, err := s.n.Operator().Revoke(ctx, req.Lock, req.Token, truncate(by), truncate(req.Why))
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, RevokeResponse{Lock: rv.Lock, Kind: grantKind(rv.Holder), Holder: *holderJSON(apiHolder(rv.Holder)), Index: rv.Index, By: by})
}

// truncate keeps a free text within the state machine's description limit.
func truncate(s string) string {
	if len(s) <= fsmwire.MaxDescriptionLen {
		return s
	}
	s = s[:fsmwire.MaxDescriptionLen]
	for len(s) > 0 && fsmwire.ValidateDescription(s) != nil {
		s = s[:len(s)-1] // cut inside a UTF-8 sequence
	}
	return s
}

func (s *Server) endSession(w http.ResponseWriter, r *http.Request) {
	var req EndSessionRequest
	if !s.decode(w, r, &req) {
		return
	}
	if req.Session == 0 || req.Session > 1<<62 {
		writeBad(w, "session: want a session id")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), unlockWait)
	defer cancel()
	if err := s.n.Operator().EndSession(ctx, lockinfo.SessionID(req.Session), PrincipalOf(r).Name, req.Why); err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"ended": true, "session": req.Session})
}

func (s *Server) removePeer(w http.ResponseWriter, r *http.Request) {
	var req RemovePeerRequest
	if !s.decode(w, r, &req) {
		return
	}
	if req.NodeID == "" {
		writeBad(w, "node_id: required")
		return
	}
	timeout, ok := opTimeout(w, req.TimeoutMS, 30*time.Second)
	if !ok {
		return
	}
	s.LongPoll(w, timeout)
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	if err := s.n.Operator().RemovePeer(ctx, req.NodeID); err != nil {
		writeErr(w, err)
		return
	}
	s.log.Warn("admin: peer removed", "member", req.NodeID, "by", PrincipalOf(r).Name)
	writeJSON(w, http.StatusOK, map[string]any{"removed": req.NodeID})
}

func (s *Server) transferLeadership(w http.ResponseWriter, r *http.Request) {
	var req TransferRequest
	if !s.decode(w, r, &req) {
		return
	}
	timeout, ok := opTimeout(w, req.TimeoutMS, 10*time.Second)
	if !ok {
		return
	}
	s.LongPoll(w, timeout)
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	leader, err := s.n.Operator().TransferLeadership(ctx, req.To)
	if err != nil {
		writeErr(w, err)
		return
	}
	s.log.Info("admin: leadership transferred", "to", leader, "by", PrincipalOf(r).Name)
	writeJSON(w, http.StatusOK, map[string]string{"leader_id": leader})
}

// snapshotSave answers GET /v1/admin/snapshot with a backup of the lock
// table (application/octet-stream; X-Raftlock-Index and
// X-Raftlock-Last-Token say what it covers).
func (s *Server) snapshotSave(w http.ResponseWriter, r *http.Request) {
	s.LongPoll(w, adminWait)
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	var buf bytes.Buffer
	info, err := s.n.Operator().Backup(ctx, &buf)
	if err != nil {
		writeErr(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="raftlock-%d.snap"`, info.Index))
	w.Header().Set("X-Raftlock-Index", strconv.FormatUint(info.Index, 10))
	w.Header().Set("X-Raftlock-Last-Token", strconv.FormatUint(info.LastToken, 10))
	w.Header().Set("Cache-Control", "no-store")
	buf.WriteTo(w)
	s.log.Info("admin: backup taken", "index", info.Index, "bytes", info.Bytes, "by", PrincipalOf(r).Name)
}

// snapshotRestore answers POST /v1/admin/snapshot: the body (a backup, at
// most Limits.MaxSnapshotBytes) replaces the lock table (see
// node.Operator.Restore for what that means for a running cluster).
func (s *Server) snapshotRestore(w http.ResponseWriter, r *http.Request) {
	s.LongPoll(w, adminWait)
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.limits.MaxSnapshotBytes))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		writeJSON(w, http.StatusRequestEntityTooLarge, ErrorJSON{Error: ErrKindTooLarge, Detail: fmt.Sprintf("backup over %d bytes (Limits.MaxSnapshotBytes)", tooLarge.Limit)})
		return
	case err != nil:
		writeBad(w, "body: "+public(err.Error()))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), adminWait)
	defer cancel()
	sum, err := s.n.Operator().Restore(ctx, bytes.NewReader(data))
	if err != nil {
		writeErr(w, err)
		return
	}
	s.log.Warn("admin: lock table restored from a backup", "bytes", len(data), "by", PrincipalOf(r).Name)
	writeJSON(w, http.StatusOK, RestoreResponse{Sessions: sum.Sessions, Locks: sum.Locks, Held: sum.Held, Waiters: sum.Waiters,
		LastToken: sum.LastToken, BackupLastToken: sum.BackupLastToken, BackupIndex: sum.BackupIndex, SessionOffset: uint64(sum.SessionOffset)})
}
