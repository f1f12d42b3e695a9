package admin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/replica"
	"github.com/raftlock/raftlock/lockapi"
	"github.com/raftlock/raftlock/node"
)

// Config configures a Server. Node and Auth are required.
type Config struct {
	Node *node.Node
	// Auth says who may do what (required: New refuses a zero Auth).
	Auth Auth
	// TTL is the default TTL of HTTP leases: a client-kept lease's (an
	// acquire without ttl_ms) and that of the server's shared session (the
	// leases of "session":"replica"). Default lockapi.DefaultTTL, the
	// library's default session TTL; at least lockapi.MinTTL(Node). A
	// client keeps its lease by asking about it at least once per TTL (see
	// AcquireRequest).
	//
	// LockDelay is the lock-delay of the shared session and of the sessions
	// of client-kept leases, and holds whoever notices a lapse (see
	// lockapi.WithLockDelay): a client-kept lease nobody asked about in time
	// and the leases a graceful stop releases once their windows ended are
	// released with it.
	TTL       time.Duration
	LockDelay time.Duration
	Owner     string // the shared session's description; default "http@<node id>"
	Metrics   *lockapi.Metrics
	Gatherer  prometheus.Gatherer // served on /metrics; nil: /metrics answers 501 not_configured
	Logger    *slog.Logger        // nil: the node's
	Limits    Limits              // zero fields: DefaultLimits
	// AllowedHosts are the Host names an Auth.Unauthenticated server
	// answers API requests for besides IP addresses, localhost and
	// *.localhost, which it always answers: any other name could be one
	// a web page rebound to this machine's address (DNS rebinding). A name
	// ("raftlock.internal", matched without the port and case), "*.suffix"
	// (every name under suffix) or "*" (every Host: only behind a proxy
	// that checks Host itself). Default none; New refuses entries that are
	// not host names. With authentication on, the Host is not checked.
	AllowedHosts []string
}

// Server serves the admin API. Create it with New, mount it (Mount, or
// Handler under a prefix with http.StripPrefix), and Close it before
// closing the node. Safe for concurrent use.
type Server struct {
	n       *node.Node
	log     *slog.Logger
	auth    authenticator
	mux     *http.ServeMux
	table   map[string]route // route pattern → what it needs
	hosts   hostPolicy
	sess    *SessionKeeper
	handles *handles
	limits  Limits
	quotas  *quotas
	conns   *connLimiter
	peers   peerCache
	reads   listingTurns    // listings served at a time (handlers_read.go)
	ctx     context.Context // ends when Close begins
	cancel  context.CancelFunc
	done    chan struct{}
}

// errInvalidConfig: New refused its Config.
var errInvalidConfig = errors.New("admin: invalid config")

// Validate reports the first problem with cfg that does not need its Node
// (Auth, AllowedHosts, Limits, the ranges of TTL and LockDelay): a program
// calls it before it starts its node, so that a bad configuration touches
// nothing. New checks the rest (a Node, TTL at least its minimum).
func (cfg Config) Validate() error {
	if _, err := cfg.Auth.compile(); err != nil {
		return err
	}
	if _, err := compileHosts(cfg.AllowedHosts); err != nil {
		return err
	}
	if err := cfg.Limits.Validate(); err != nil {
		return err
	}
	if cfg.TTL < 0 || cfg.TTL > fsmwire.MaxTTL {
		return fmt.Errorf("%w: TTL %v outside [0, %v]", errInvalidConfig, cfg.TTL, fsmwire.MaxTTL)
	}
	if cfg.LockDelay < 0 || cfg.LockDelay > fsmwire.MaxLockDelay {
		return fmt.Errorf("%w: LockDelay %v outside [0, %v]", errInvalidConfig, cfg.LockDelay, fsmwire.MaxLockDelay)
	}
	return nil
}

// New returns a Server. It opens the shared HTTP session in the background
// (and again whenever it is lost); requests that need it wait for it.
func New(cfg Config) (*Server, error) {
	if cfg.Node == nil {
		return nil, errors.Join(errInvalidConfig, errors.New("admin: nil node"))
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	auth, err := cfg.Auth.compile()
	if err != nil {
		return nil, err
	}
	hosts, err := compileHosts(cfg.AllowedHosts)
	if err != nil {
		return nil, err
	}
	cfg.Limits = cfg.Limits.withDefaults()
	if cfg.TTL == 0 {
		cfg.TTL = lockapi.DefaultTTL
	}
	if min := lockapi.MinTTL(cfg.Node); cfg.TTL < min {
		return nil, errors.Join(errInvalidConfig, errors.New("admin: TTL "+cfg.TTL.String()+" below the node's minimum session TTL "+min.String()))
	}
	if cfg.Owner == "" {
		cfg.Owner = "http@" + cfg.Node.ID()
	}
	if cfg.Logger == nil {
		cfg.Logger = replica.Of(cfg.Node).Logger()
	}
	// The shared session opens in the node's reserve when HTTP clients (or
	// the application) used up the node's share of the sessions.
	opts := []lockapi.SessionOption{lockapi.WithOwner(cfg.Owner), lockapi.WithLogger(cfg.Logger), lockapi.WithReserve()}
	if cfg.Metrics != nil {
		opts = append(opts, lockapi.WithMetrics(cfg.Metrics))
	}
	s := &Server{
		n: cfg.Node, log: cfg.Logger, auth: auth, mux: http.NewServeMux(), table: map[string]route{}, hosts: hosts,
		sess:    NewSessionKeeper(cfg.Node, cfg.TTL, cfg.LockDelay, opts...),
		handles: newHandles(),
		limits:  cfg.Limits,
		quotas:  newQuotas(cfg.Limits),
		conns:   newConnLimiter(cfg.Limits.MaxConns, cfg.Limits.MaxConnsPerAddr, cfg.Logger),
		reads:   newListingTurns(),
		done:    make(chan struct{}),
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.routes(cfg.Gatherer)
	go s.background()
	return s, nil
}

// Handler returns the API's handler (the Server itself): routes, then the
// checks against requests a browser was made to send (Host, cross-origin,
// Content-Type: see the package doc), then authentication, then the
// route's handler; JSON errors for unknown paths (404) and methods (405). Serve it with an http.Server set up by
// ConfigureHTTP (timeouts, header limit).
func (s *Server) Handler() http.Handler { return s }

// Mount registers the API on mux under prefix (like net/http/pprof's
// /debug/pprof/): prefix "/raftlock" serves the status page at
// /raftlock/ and the API at /raftlock/v1/…; "" or "/" mounts it at the
// root.
func (s *Server) Mount(mux *http.ServeMux, prefix string) {
	prefix = strings.TrimSuffix(prefix, "/")
	if prefix == "" {
		mux.Handle("/", s)
		return
	}
	mux.Handle(prefix+"/", http.StripPrefix(prefix, s))
}

// Mux returns the API's route mux, for programs that add routes of their
// own (the demo). Routes added there need the admin role (unless Auth is
// Unauthenticated), and pass the API's checks: a request with a body
// other than a GET's must be application/json.
func (s *Server) Mux() *http.ServeMux { return s.mux }

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h, pattern := s.mux.Handler(r) // does not set r's path values
	if pattern == "" {
		s.noRoute(w, r, h)
		return
	}
	rt, known := s.table[pattern]
	if !known {
		rt = route{role: RoleAdmin}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			rt.body = bodyJSON
		}
	}
	if rt.role != "" {
		if !s.guard(w, r, rt.body) {
			return
		}
		c, ok := s.authenticate(w, r, rt.role)
		if !ok {
			return
		}
		r = r.WithContext(withCaller(r.Context(), c))
	}
	s.mux.ServeHTTP(w, r) // routes again: it sets the path values
}

// Session returns the current shared HTTP session, opening one if there is
// none or it was lost (bounded by ctx).
func (s *Server) Session(ctx context.Context) (*lockapi.Session, error) { return s.sess.Get(ctx) }

// Close stops the server gracefully: it releases what HTTP clients hold,
// each lease once the window last reported to its client has ended (at
// most a TTL after the last answer; answers from now on report none), then
// closes the shared session and the acquisitions' own sessions, and stops
// the background work. Stop serving HTTP first, and close the node after.
//
// If ctx ends while a lease is still inside its window, Close returns an
// error wrapping ctx's and leaves that lease held: its session ends with
// the node, and the leader expires it after its TTL (and lock-delay). So
// give ctx at least the server's TTL.
func (s *Server) Close(ctx context.Context) error {
	s.cancel()
	<-s.done
	if err := s.handles.drain(ctx); err != nil {
		s.sess.leave()
		return err
	}
	s.handles.closeOwn(ctx)
	return s.sess.Close(ctx)
}

// background keeps the shared HTTP session open (so that /v1/status shows
// it and the first acquisition does not pay for it) and forgets the
// handles of leases that ended long ago.
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
			s.log.Debug("admin: cannot open the HTTP session yet", "err", err)
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
