package admin

import (
	"bytes"
	"log/slog"
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// route is what a route pattern needs: a role ("" public) and the media
// type of its request body ("" none; see Server.guard).
type route struct {
	role Role
	body string
}

// routes registers every route with the role it needs ("" public). A
// POST's body is JSON, the restore's a backup.
func (s *Server) routes(g prometheus.Gatherer) {
	add := func(pattern string, role Role, h http.HandlerFunc) {
		s.mux.HandleFunc(pattern, h)
		rt := route{role: role}
		if strings.HasPrefix(pattern, http.MethodPost+" ") {
			rt.body = bodyJSON
		}
		s.table[pattern] = rt
	}
	// Public: probes and the page (which holds no data; it asks for a token
	// when the API wants one).
	add("GET /healthz", "", s.healthz)
	add("GET /readyz", "", s.readyz)
	add("GET /{$}", "", s.page)

	add("GET /v1/status", RoleRead, s.status)
	add("GET /v1/members", RoleRead, s.members)
	add("GET /v1/locks/{name...}", RoleRead, s.lock)
	add("GET /v1/locks", RoleRead, s.locks)
	add("GET /v1/sessions", RoleRead, s.sessions)
	add("GET /v1/whoami", RoleRead, s.whoami)

	add("POST /v1/acquire", RoleLock, s.acquire)
	add("POST /v1/release", RoleLock, s.release)
	add("GET /v1/lease", RoleLock, s.lease)
	add("GET /v1/lease/wait", RoleLock, s.leaseWait)

	add("POST /v1/admin/revoke", RoleAdmin, s.revoke)
	add("POST /v1/admin/end-session", RoleAdmin, s.endSession)
	add("POST /v1/admin/remove-peer", RoleAdmin, s.removePeer)
	add("POST /v1/admin/transfer-leadership", RoleAdmin, s.transferLeadership)
	add("GET /v1/admin/snapshot", RoleAdmin, s.snapshotSave)
	add("POST /v1/admin/snapshot", RoleAdmin, s.snapshotRestore)
	s.table["POST /v1/admin/snapshot"] = route{role: RoleAdmin, body: bodyBackup}

	if g != nil {
		h := promhttp.HandlerFor(g, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn)})
		add("GET /metrics", RoleRead, h.ServeHTTP)
	}
}

// noRoute answers a request no route takes: the mux's own answer (a
// redirect to the canonical path passes through) with its 404 and 405
// turned into JSON errors.
func (s *Server) noRoute(w http.ResponseWriter, r *http.Request, h http.Handler) {
	rec := &recorder{header: http.Header{}, code: http.StatusOK}
	h.ServeHTTP(rec, r)
	switch {
	case rec.code == http.StatusNotFound && r.URL.Path == "/metrics":
		// Not routed without a Gatherer (an application may mount its own
		// on Mux): say why rather than "no such path".
		writeJSON(w, http.StatusNotImplemented, ErrorJSON{Error: ErrKindNotConfigured, Detail: "metrics not configured (admin.Config.Gatherer)"})
	case rec.code == http.StatusNotFound:
		writeJSON(w, http.StatusNotFound, ErrorJSON{Error: ErrKindNotFound, Detail: "no such path: " + r.URL.Path})
	case rec.code == http.StatusMethodNotAllowed:
		allow := rec.header.Get("Allow")
		w.Header().Set("Allow", allow)
		writeJSON(w, http.StatusMethodNotAllowed, ErrorJSON{Error: ErrKindMethod, Detail: r.Method + " " + r.URL.Path + ": allowed: " + allow})
	default:
		for k, v := range rec.header {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.code)
		w.Write(rec.body.Bytes())
	}
}

// recorder keeps what the mux's fallback handlers (not found, method not
// allowed, redirects: short answers) write.
type recorder struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header         { return r.header }
func (r *recorder) WriteHeader(code int)        { r.code = code }
func (r *recorder) Write(b []byte) (int, error) { return r.body.Write(b) }
