//go:build unix

package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/raftlock/raftlock/admin"
	"github.com/raftlock/raftlock/fence"
	"github.com/raftlock/raftlock/lockapi"
	"github.com/raftlock/raftlock/node"
)

// childEnv carries a replica process's spec (JSON): the demo re-executes
// itself with it set.
const childEnv = "RAFTLOCK_DEMO_CHILD"

// childSpec is what one replica process is told by the parent.
type childSpec struct {
	ID          string
	DataDir     string
	Bind        string // Raft/RPC
	Gossip      string
	Join        []string
	HTTP        string
	DB          store
	Records     string // grant records (JSON lines), appended to
	TTL         time.Duration
	Timing      node.Timing
	Docs        int // documents doc:1..doc:Docs
	Workers     int
	Incarnation int
}

// maybeRunChild runs the replica process and exits if this process is one
// (childEnv set); otherwise it returns.
func maybeRunChild() {
	v := os.Getenv(childEnv)
	if v == "" {
		return
	}
	var spec childSpec
	if err := json.Unmarshal([]byte(v), &spec); err != nil {
		fmt.Fprintln(os.Stderr, "demo replica: bad spec:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := runChild(ctx, spec)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo replica:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// child is one replica process of the demo: a raftlock node embedded in an
// "application" whose workers render documents under per-document locks and
// publish them through the SQL fence, plus a singleton job.
type child struct {
	ctx     context.Context // ends when the process stops
	spec    childSpec
	n       *node.Node
	log     *slog.Logger
	db      *sql.DB
	fence   *fence.SQL
	rec     *records
	metrics *lockapi.Metrics
	wsess   *admin.SessionKeeper // the workers' session
	workers workers
	stats   stats

	mu        sync.Mutex
	stale     map[string]*staleJob
	singleton bool // campaign started
}

func runChild(ctx context.Context, spec childSpec) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go watchParent(ctx, cancel)

	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	log.Info("demo replica starting", "id", spec.ID, "incarnation", spec.Incarnation)
	reg := prometheus.NewRegistry()
	cfg := node.DefaultConfig()
	cfg.ID, cfg.DataDir = spec.ID, spec.DataDir
	cfg.BindAddr, cfg.Gossip.Addr, cfg.Gossip.Join = spec.Bind, spec.Gossip, spec.Join
	cfg.BootstrapExpect = 3
	cfg.Timing = spec.Timing
	cfg.Gossip.Timing = node.LANGossipTiming()
	cfg.Gossip.Timing.RetryJoinInterval = time.Second
	cfg.ReapTimeout = 10 * time.Minute // the demo restarts its dead replicas itself
	cfg.Logger, cfg.Registerer = log, reg

	ln, err := net.Listen("tcp", spec.HTTP)
	if err != nil {
		return err
	}
	defer ln.Close()
	startCtx, cancelStart := context.WithTimeout(ctx, 30*time.Second)
	n, err := node.Start(startCtx, cfg)
	cancelStart()
	if err != nil {
		return err
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		n.Close(closeCtx)
	}()

	db, err := spec.DB.open()
	if err != nil {
		return err
	}
	defer db.Close()
	rec, err := openRecords(spec.Records, spec.ID)
	if err != nil {
		return err
	}
	defer rec.close()
	m, err := lockapi.NewMetrics(reg)
	if err != nil {
		return err
	}
	c := &child{
		ctx: ctx, spec: spec, n: n, log: log, db: db, fence: spec.DB.fence(db), rec: rec, metrics: m,
		wsess: admin.NewSessionKeeper(n, spec.TTL, 0, lockapi.WithOwner("worker@"+spec.ID), lockapi.WithMetrics(m), lockapi.WithLogger(log)),
		stale: make(map[string]*staleJob),
	}
	c.workers.c = c
	api, err := admin.New(admin.Config{Node: n, Auth: admin.Auth{Unauthenticated: true}, TTL: spec.TTL, Metrics: m, Gatherer: reg, Logger: log})
	if err != nil {
		return err
	}
	mux := api.Mux()
	mux.HandleFunc("POST /demo/workers", c.handleWorkers)
	mux.HandleFunc("POST /demo/singleton", c.handleSingleton)
	mux.HandleFunc("POST /demo/stale/acquire", c.handleStaleAcquire)
	mux.HandleFunc("POST /demo/stale/finish", c.handleStaleFinish)
	mux.HandleFunc("POST /demo/publish", c.handlePublish)
	mux.HandleFunc("GET /demo/stats", c.handleStats)

	reqCtx, cancelRequests := context.WithCancel(ctx)
	srv := &http.Server{Handler: mux, BaseContext: func(net.Listener) context.Context { return reqCtx }}
	api.ConfigureHTTP(srv) // timeouts and limits; the long /demo handlers extend theirs (admin.LongPoll)
	go srv.Serve(ln)
	log.Info("demo replica serving", "http", spec.HTTP)

	<-ctx.Done()
	log.Info("demo replica stopping")
	cancelRequests()
	c.workers.stop()
	shCtx, cancelSh := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancelSh()
	srv.Shutdown(shCtx)
	// The API keeps each HTTP client's lease until the window reported to
	// it has ended: at most a TTL.
	apiCtx, cancelAPI := context.WithTimeout(context.Background(), spec.TTL+2*time.Second)
	defer cancelAPI()
	api.Close(apiCtx)
	c.wsess.Close(apiCtx)
	return nil
}

// watchParent ends the replica if the demo process is gone (Pdeathsig does
// it on Linux already; this covers the other systems).
func watchParent(ctx context.Context, cancel context.CancelFunc) {
	ppid := os.Getppid()
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if os.Getppid() != ppid {
				cancel()
				return
			}
		}
	}
}

// records appends one JSON line per grant this replica received. The
// parent reads every replica's records at the end to check that tokens
// strictly increase per lock across the cluster. (Lines are written with one
// write(2) each, so a SIGKILL loses nothing already recorded.)
type records struct {
	mu      sync.Mutex
	f       *os.File
	replica string
}

type grantRecord struct {
	Lock    string `json:"lock"`
	Token   uint64 `json:"token"`
	Replica string `json:"replica"`
	Role    string `json:"role"`  // worker, singleton, stale-holder, takeover, http
	AtNS    int64  `json:"at_ns"` // when the grant was returned (wall clock, same machine)
}

func openRecords(path, replica string) (*records, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	return &records{f: f, replica: replica}, nil
}

func (r *records) grant(lock string, tok lockapi.Token, role string) {
	b, _ := json.Marshal(grantRecord{Lock: lock, Token: uint64(tok), Replica: r.replica, Role: role, AtNS: time.Now().UnixNano()})
	r.mu.Lock()
	defer r.mu.Unlock()
	r.f.Write(append(b, '\n'))
}

func (r *records) close() { r.f.Close() }

// publish writes a document through the fence: the fence check and the write
// commit together, or not at all. A refused write is recorded.
func (c *child) publish(ctx context.Context, doc string, tok lockapi.Token, content string) error {
	err := c.fence.Exec(ctx, doc, uint64(tok), func(tx *sql.Tx) error {
		now := time.Now().UnixNano()
		if _, err := tx.Exec(c.spec.DB.q(`INSERT INTO documents (id, content, token, replica, version) VALUES (?, ?, ?, ?, 1)
ON CONFLICT (id) DO UPDATE SET content = excluded.content, token = excluded.token, replica = excluded.replica, version = documents.version + 1`),
			doc, content, int64(tok), c.spec.ID); err != nil {
			return err
		}
		_, err := tx.Exec(c.spec.DB.q(`INSERT INTO publications (doc, token, replica, at_ns) VALUES (?, ?, ?, ?)`), doc, int64(tok), c.spec.ID, now)
		return err
	})
	switch {
	case err == nil:
		c.stats.add(&c.stats.published)
	case errors.Is(err, fence.ErrStaleToken):
		c.stats.add(&c.stats.rejected)
		c.metrics.FenceRejected()
		highest, _ := c.fence.Highest(context.Background(), doc)
		if _, e := c.db.Exec(c.spec.DB.q(`INSERT INTO rejections (doc, token, highest, replica, at_ns) VALUES (?, ?, ?, ?, ?)`),
			doc, int64(tok), int64(highest), c.spec.ID, time.Now().UnixNano()); e != nil {
			c.log.Warn("recording a rejection", "err", e)
		}
	default:
		c.stats.add(&c.stats.publishErrors)
	}
	return err
}
