// Command replica is a real raftlock replica: a node that finds its peers
// through gossip, with the admin API (package admin) for HTTP lock
// clients, operators and probes, Prometheus metrics and the status page.
// Run three of them (on one machine or three) to get a lock service you
// can poke with curl or the raftlock command; see examples/README.md.
//
//	RAFTLOCK_ADMIN_TOKEN=... replica -id r1 -data-dir /var/lib/raftlock/r1 \
//	  -bind 10.0.0.1:7400 -gossip 10.0.0.1:7401 -join 10.0.0.2:7401,10.0.0.3:7401 \
//	  -bootstrap-expect 3 -http 127.0.0.1:8080
//
// The HTTP API (see package admin) needs authentication: a bearer token
// (-admin-token, -admin-token-file), client certificates (-http-client-ca
// with -http-tls-cert), or -http-no-auth on a closed network. Every flag can
// be set by an environment variable (RAFTLOCK_ID, …); flags win. SIGINT or
// SIGTERM: the replica closes its HTTP sessions and stops for a restart
// (with -leave-on-stop: leaves the cluster for good).
//
// Exit status: 0 after a signal; 2 for a configuration error — a flag or
// variable, a file it names, or a data dir that belongs to another id or
// left its cluster — which restarting does not fix (every setting is checked
// before the data dir or the network is touched; systemd units say
// RestartPreventExitStatus=2); 1 for anything else (a busy port, a name
// DNS does not resolve yet, a failure at run time).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/raftlock/raftlock/admin"
	"github.com/raftlock/raftlock/lockapi"
	"github.com/raftlock/raftlock/node"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stderr)
	stop()
	if errors.Is(err, errUsage) {
		os.Exit(exitConfig)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "replica:", err)
		os.Exit(1)
	}
}

// errUsage: a usage or configuration error was printed; the replica exits
// with exitConfig, which service managers are told not to retry
// (RestartPreventExitStatus in examples/deploy/systemd).
var errUsage = errors.New("usage")

const exitConfig = 2

// run runs the replica until ctx ends (then shuts it down gracefully) or a
// fatal error.
func run(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "certs" {
		return certs(args[1:], stderr)
	}
	if len(args) > 0 && args[0] == "migrate-log-store" {
		return migrateLogStore(ctx, args[1:], stderr)
	}
	c, err := parseConfig(args, getenv, stderr)
	if errors.Is(err, flagHelp) {
		return nil
	}
	usage := func(err error) error {
		fmt.Fprintln(stderr, "replica:", err)
		return errUsage
	}
	if err != nil {
		return usage(err)
	}
	// Everything is checked before the data dir or the network is touched.
	set, err := c.prepare()
	if errors.Is(err, errLookup) {
		return err // DNS may answer on the next start: restarting may help
	} else if err != nil {
		return usage(err)
	}
	level, _ := logLevel(c.LogLevel)
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	nc := set.node
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if err := node.EnableRaftMetrics(reg); err != nil {
		return err
	}
	nc.Registerer, nc.Logger = reg, log

	// Listen before starting the node: a busy port fails fast.
	ln, err := net.Listen("tcp", c.HTTP)
	if err != nil {
		return fmt.Errorf("http: %w", err)
	}
	defer ln.Close()

	startCtx, cancel := context.WithTimeout(ctx, time.Minute)
	n, err := node.Start(startCtx, nc)
	cancel()
	if err != nil {
		if err, final := startError(c, err); final {
			return usage(err)
		}
		return err
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		stop := n.Close // a restart: the replica stays a member
		if c.LeaveOnStop {
			stop = n.Leave // a decommission
		}
		if err := stop(closeCtx); err != nil {
			log.Warn("node stop", "err", err, "leave", c.LeaveOnStop)
		}
	}()

	m, err := lockapi.NewMetrics(reg)
	if err != nil {
		return err
	}
	api, err := admin.New(admin.Config{Node: n, Auth: set.auth, TTL: c.TTL, LockDelay: c.LockDelay, Metrics: m, Gatherer: reg, Logger: log,
		AllowedHosts: set.hosts})
	if err != nil {
		return usage(inFlagTerms(err))
	}
	defer func() {
		// Close keeps each HTTP client's lease until the window reported to
		// it has ended: at most a TTL.
		closeCtx, cancel := context.WithTimeout(context.Background(), c.TTL+5*time.Second)
		defer cancel()
		if err := api.Close(closeCtx); err != nil {
			log.Warn("closing the HTTP sessions", "err", err)
		}
	}()

	reqCtx, cancelRequests := context.WithCancel(context.Background())
	defer cancelRequests()
	mux := http.NewServeMux()
	api.Mount(mux, "/")
	tlsConf := set.https
	srv := &http.Server{Handler: mux, TLSConfig: tlsConf,
		BaseContext: func(net.Listener) context.Context { return reqCtx },
		ErrorLog:    httpErrorLog(log)}
	api.ConfigureHTTP(srv) // read, write and idle timeouts; header limit (admin.Limits)
	serveErr := make(chan error, 1)
	go func() {
		if tlsConf != nil {
			serveErr <- srv.ServeTLS(ln, "", "")
		} else {
			serveErr <- srv.Serve(ln)
		}
	}()
	log.Info("replica started", "id", c.ID, "http", ln.Addr().String(), "https", tlsConf != nil, "raft", n.Addr(), "gossip", n.GossipAddr())
	go func() {
		if n.WaitReady(ctx) == nil {
			log.Info("replica ready: the cluster has a leader", "leader", n.Status().LeaderID)
		}
	}()

	select {
	case <-ctx.Done():
		log.Info("shutting down")
	case err = <-serveErr:
		err = fmt.Errorf("http: %w", err)
	}
	shCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cancelRequests() // waiting acquisitions and long polls end now
	srv.Shutdown(shCtx)
	return err
}
