package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/rpc"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/raftlock/raftlock/bench/internal/lockservice"
)

// StartTimeout bounds a replica's start (its cluster must elect a leader).
const StartTimeout = 60 * time.Second

// IsChild reports whether this process was started as a replica process.
func IsChild() bool { return os.Getenv(EnvChild) != "" }

// ChildMain runs a replica process: it starts the replica in the background,
// prints "agent <addr>" on stdout and serves the parent's calls until its
// stdin closes (the parent died) or a signal arrives; the parent normally
// ends it with SIGKILL. It never returns.
func ChildMain() {
	if err := childMain(); err != nil {
		fmt.Fprintln(os.Stderr, "replica process:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func childMain() error {
	var cfg ChildConfig
	if err := json.Unmarshal([]byte(os.Getenv(EnvChild)), &cfg); err != nil {
		return fmt.Errorf("%s: %w", EnvChild, err)
	}
	sys, err := lockservice.Lookup(cfg.System)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	// The parent holds our stdin open for our whole life: EOF means it is
	// gone, and a replica process must never outlive the benchmark.
	go func() {
		io.Copy(io.Discard, os.Stdin)
		cancel()
	}()

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer l.Close()
	a := newAgent(ctx, cfg.Index)
	srv := rpc.NewServer()
	if err := srv.RegisterName("Agent", a); err != nil {
		return err
	}
	go srv.Accept(l)
	fmt.Printf("agent %s\n", l.Addr())

	go a.start(sys, lockservice.ReplicaConfig{
		Index:   cfg.Index,
		Addrs:   cfg.Addrs,
		DataDir: cfg.DataDir,
		Log:     os.Stderr,
	}, StartTimeout)

	<-ctx.Done()
	// Nothing worth saving: the data dir is a temporary one.
	return nil
}
