package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/raftlock/raftlock/node"
)

// migrateLogStore is the migrate-log-store subcommand: it converts a
// stopped replica's data dir from one Raft log store to the other
// (node.MigrateLogStore: crash-safe, the old store is removed only after
// the new one is complete). Restart the replica with -log-store set to the
// new kind afterwards. A running replica holds its store's lock: the
// command then fails and changes nothing.
func migrateLogStore(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("replica migrate-log-store", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("data-dir", "", "data dir of the stopped replica (required)")
	from := fs.String("from", string(node.LogStoreBolt), "the log store the data dir holds: bolt or wal")
	to := fs.String("to", string(node.LogStoreWAL), "the log store to convert it to: bolt or wal")
	usage := func(err error) error {
		fmt.Fprintln(stderr, "replica migrate-log-store:", err)
		return errUsage
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return errUsage
	}
	switch {
	case fs.NArg() > 0:
		return usage(fmt.Errorf("unexpected arguments %q", fs.Args()))
	case *dir == "":
		return usage(errors.New("-data-dir is required"))
	case !validLogStore(*from):
		return usage(fmt.Errorf("-from %q: want %s or %s", *from, node.LogStoreBolt, node.LogStoreWAL))
	case !validLogStore(*to):
		return usage(fmt.Errorf("-to %q: want %s or %s", *to, node.LogStoreBolt, node.LogStoreWAL))
	case *from == *to:
		return usage(fmt.Errorf("-from and -to are both %q", *from))
	}
	if err := node.MigrateLogStore(ctx, *dir, node.LogStore(*from), node.LogStore(*to)); err != nil {
		return fmt.Errorf("migrate-log-store: %w", err)
	}
	fmt.Fprintf(stderr, "%s now holds a %s log store: start the replica with -log-store %s\n", *dir, *to, *to)
	return nil
}

// validLogStore reports whether s names a log store (-log-store, -from, -to).
func validLogStore(s string) bool {
	return s == string(node.LogStoreBolt) || s == string(node.LogStoreWAL)
}
