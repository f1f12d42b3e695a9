//go:build unix

// Command demo shows raftlock doing its job, with real effects, in one
// command:
//
//	go run ./examples/demo
//
// It starts three replica processes of itself on loopback (data under a
// temporary directory, removed afterwards). They find each other through
// gossip and form a Raft cluster. Each replica embeds a raftlock node and runs
// document workers that lock a document, render it and publish it into one
// shared SQLite database (with -postgres: a schema of its own in a
// PostgreSQL database) through the SQL fence, plus a singleton job. Then:
//
//  1. the workers publish; the singleton runs on exactly one replica;
//  2. a replica holding a document lock is frozen (SIGSTOP) past its lease;
//     another replica is granted the lock with a higher token and publishes;
//     the frozen one is resumed and writes with its old token — the fence
//     rejects it;
//  3. the Raft leader is killed (SIGKILL): the time to the next grant is
//     measured; the singleton moves;
//  4. a second replica is killed: without a quorum nothing is granted or
//     renewed and held leases end at their deadlines; both are restarted
//     from their data and the cluster recovers;
//  5. a table of what happened and the invariant checks.
//
// It exits 0 only if every check held. Flags: -short (shorter phases, same
// steps), -json PATH (results file), -keep (keep the data directory),
// -timeout (overall deadline).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	maybeRunChild() // a replica process: runs and exits

	var opt options
	flag.BoolVar(&opt.short, "short", false, "shorter phases (same steps), for tests")
	flag.StringVar(&opt.jsonPath, "json", "", "write the results as JSON to this file")
	flag.BoolVar(&opt.keep, "keep", false, "keep the data directory (replica logs, database)")
	flag.DurationVar(&opt.timeout, "timeout", 90*time.Second, "overall deadline")
	flag.StringVar(&opt.postgres, "postgres", "", "write into this PostgreSQL database (postgres://user@host:port/db?sslmode=disable) instead of a SQLite file: the run makes a schema of its own there and drops it at the end")
	flag.Parse()
	opt.out = os.Stdout

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := run(ctx, opt)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}
