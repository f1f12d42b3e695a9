// Package lockhttp is the HTTP API of the example replica (examples/replica)
// and of the demo's replica processes (examples/demo): one lockapi session per
// process for HTTP clients, each acquisition its own lease behind an opaque
// handle, read-only views of locks and of the node, Prometheus metrics and a
// small self-updating HTML status page.
//
// Routes (JSON bodies):
//
//	POST /v1/acquire      {"lock":"x","wait":true,"timeout_ms":5000}
//	POST /v1/release      {"handle":"..."}
//	GET  /v1/lease        ?handle=
//	GET  /v1/lease/wait   ?handle=&timeout_ms=
//	GET  /v1/locks/{name} ?sync=1&waiters=
//	GET  /v1/locks        ?prefix=&limit=&waiters=&sync=1
//	GET  /v1/status
//	GET  /metrics
//	GET  /
//
// Limits (timeouts, body and header sizes, per-client quotas, listing
// sizes) are in Limits; every call that cannot commit answers 503
// no_quorum within its deadline (a TryLock within a few election timeouts,
// including the opening of the HTTP session).
//
// It is example code, not part of the library: it holds no lock logic of
// its own, only the mapping between HTTP and lockapi.
package lockhttp

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/raftlock/raftlock/lockapi"
	"github.com/raftlock/raftlock/node"
)

// Config configures a Server.
type Config struct {
	Node      *node.Node
	TTL       time.Duration // session TTL; default lockapi.DefaultTTL
	LockDelay time.Duration // session lock-delay; default 0
	Owner     string        // session owner description; default "http@<node id>"
	Metrics   *lockapi.Metrics
	Gatherer  prometheus.Gatherer // served on /metrics; nil: no /metrics
	Logger    *slog.Logger        // nil: the node's
	Limits    Limits              // zero fields: DefaultLimits
}

// Server serves the HTTP API. Create it with New, mount Handler (or add
// routes to Mux), and Close it before closing the node.
type Server struct {
	n       *node.Node
	log     *slog.Logger
	mux     *http.ServeMux
	sess    *SessionKeeper
	handles *handles
	limits  Limits
	quotas  *quotas
	ctx     context.Context // ends when Close begins
	cancel  context.CancelFunc
	done    chan struct{}
}

// New returns a Server. It opens the HTTP session in the background (and
// again whenever it is lost); requests that need it wait for it.
func New(cfg Config) (*Server, error) {
	if cfg.Node == nil {
		return nil, errors.New("lockhttp: nil node")
	}
	if err := cfg.Limits.Validate(); err != nil {
		return nil, err
	}
	cfg.Limits = cfg.Limits.withDefaults()
	if cfg.TTL == 0 {
		cfg.TTL = lockapi.DefaultTTL
	}
	if cfg.Owner == "" {
		cfg.Owner = "http@" + cfg.Node.ID()
	}
	if cfg.Logger == nil {
		cfg.Logger = cfg.Node.Logger()
	}
	opts := []lockapi.SessionOption{lockapi.WithOwner(cfg.Owner), lockapi.WithLogger(cfg.Logger)}
	if cfg.Metrics != nil {
		opts = append(opts, lockapi.WithMetrics(cfg.Metrics))
	}
	s := &Server{
		n: cfg.Node, log: cfg.Logger, mux: http.NewServeMux(),
		sess:    NewSessionKeeper(cfg.Node, cfg.TTL, cfg.LockDelay, opts...),
		handles: newHandles(),
		limits:  cfg.Limits,
		quotas:  newQuotas(cfg.Limits),
		done:    make(chan struct{}),
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.mux.HandleFunc("POST /v1/acquire", s.acquire)
	s.mux.HandleFunc("POST /v1/release", s.release)
	s.mux.HandleFunc("GET /v1/lease", s.lease)
	s.mux.HandleFunc("GET /v1/lease/wait", s.leaseWait)
	s.mux.HandleFunc("GET /v1/locks/{name...}", s.lock)
	s.mux.HandleFunc("GET /v1/locks", s.locks)
	s.mux.HandleFunc("GET /v1/status", s.status)
	if cfg.Gatherer != nil {
		s.mux.Handle("GET /metrics", promhttp.HandlerFor(cfg.Gatherer, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelWarn)}))
	}
	s.mux.HandleFunc("GET /{$}", s.page)
	go s.background()
	return s, nil
}

// Handler returns the API's handler. Serve it with an http.Server set up
// by ConfigureHTTP (timeouts, header limit).
func (s *Server) Handler() http.Handler { return s.mux }

// Mux returns the API's mux, for programs that add their own routes.
func (s *Server) Mux() *http.ServeMux { return s.mux }

// Session returns the current HTTP session, opening one if there is none or
// it was lost (bounded by ctx).
func (s *Server) Session(ctx context.Context) (*lockapi.Session, error) { return s.sess.Get(ctx) }

// Close closes the HTTP session (releasing what HTTP clients hold) and stops
// the background work. Call it before closing the node.
func (s *Server) Close(ctx context.Context) error {
	s.cancel()
	<-s.done
	return s.sess.Close(ctx)
}

// background keeps an HTTP session open (so that /v1/status shows it and the
// first acquisition does not pay for it) and forgets the handles of leases
// that ended long ago.
func (s *Server) background() {
	defer close(s.done)
	// Open the session once the node is ready: opened earlier, it would
	// wait for the first election and start with part of its TTL spent.
	select {
	case <-s.n.Ready():
	case <-s.ctx.Done():
		return
	}
	sweep := time.NewTicker(time.Minute)
	defer sweep.Stop()
	for {
		ctx, cancel := context.WithTimeout(s.ctx, s.sess.ttl)
		sess, err := s.sess.Get(ctx)
		cancel()
		var lost <-chan struct{}
		var retry <-chan time.Time
		if err == nil {
			lost = sess.Done()
		} else {
			if s.ctx.Err() != nil {
				return
			}
			s.log.Debug("lockhttp: cannot open the HTTP session yet", "err", err)
			retry = time.After(s.sess.ttl / 3)
		}
	wait:
		for {
			select {
			case <-s.ctx.Done():
				return
			case <-sweep.C:
				now := time.Now()
				s.handles.sweep(now, now.Add(-forgetAfter))
			case <-lost:
				break wait
			case <-retry:
				break wait
			}
		}
	}
}

// forgetAfter: handles of leases that were lost (not released) are kept this
// long so that clients can still learn what happened to them.
const forgetAfter = 10 * time.Minute
