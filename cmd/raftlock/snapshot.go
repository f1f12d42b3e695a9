package main

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/raftlock/raftlock/admin"
	"github.com/raftlock/raftlock/internal/backuppreview"
)

var restoreCommand = command{
	name: "snapshot", synopsis: "save FILE | snapshot restore [-force] FILE",
	summary: "back up the lock table to FILE, or restore it from FILE (admin)",
	help: "save writes a backup of the cluster's lock table (sessions, locks, holders, queues, the token counter).\n\n" +
		"restore replaces the lock table of the whole cluster with the backup's, at one index of the log:\n" +
		"every session now in the cluster ends (its clients lose their locks at their next keepalive), and\n" +
		"the backup's sessions come back holding the backup's locks, kept by nobody, until their TTL (plus\n" +
		"the leader's takeover grace) runs out; only then do their locks pass to their waiters. Fencing\n" +
		"tokens never go back: the next grant's token is above both histories'. restore says what the\n" +
		"backup holds and asks for confirmation on stdin (answer y), unless -force.",
	setup: snapshotArgs,
}

func snapshotArgs(e *env, fs *flag.FlagSet) func([]string) (runner, error) {
	force := fs.Bool("force", false, "restore: do not ask for confirmation (scripts)")
	return func(args []string) (runner, error) {
		switch {
		case len(args) != 2 || (args[0] != "save" && args[0] != "restore"):
			return nil, usageErr("want save FILE or restore [-force] FILE, not %q", args)
		case args[0] == "save" && *force:
			return nil, usageErr("-force is for restore (save overwrites FILE anyway)")
		case args[0] == "save":
			return func(ctx context.Context) (int, error) { return 0, e.saveSnapshot(ctx, args[1]) }, nil
		}
		return func(ctx context.Context) (int, error) { return e.restoreSnapshot(ctx, args[1], *force) }, nil
	}
}

func (e *env) saveSnapshot(ctx context.Context, file string) error {
	var data []byte
	if err := e.c.call(ctx, "GET", "/v1/admin/snapshot", nil, &data, 5*time.Minute); err != nil {
		return err
	}
	if err := writeFileAtomic(file, data); err != nil {
		return err
	}
	out := map[string]any{"file": file, "bytes": len(data)}
	return e.emit(out, func(t *tabwriter.Writer) { row(t, "saved", fmt.Sprintf("%s (%d bytes)", file, len(data))) })
}

// restoreSnapshot warns what a restore does, asks for confirmation (unless
// force), and restores.
func (e *env) restoreSnapshot(ctx context.Context, file string, force bool) (int, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return exitError, err
	}
	fmt.Fprintf(e.stderr, "raftlock snapshot restore: restoring %s replaces the lock table of the whole cluster of %s:\n", shown(file), shown(e.c.base))
	fmt.Fprintln(e.stderr, "  - every session now in the cluster ends: its clients lose their locks at their next keepalive;")
	if p, err := backuppreview.Read(data); err != nil {
		fmt.Fprintf(e.stderr, "  - this raftlock cannot read the backup (%s): the replica decides whether it is one;\n", shown(err))
		fmt.Fprintln(e.stderr, "  - the backup's sessions come back holding its locks until their TTL runs out;")
	} else {
		fmt.Fprintf(e.stderr, "  - the backup's %s come back, holding %s (%s waiting), kept by nobody: they hold them\n",
			count(p.Sessions, "session"), count(p.Held, "lock"), count(p.Waiters, "acquisition"))
		fmt.Fprintf(e.stderr, "    until their TTL (up to %s) plus the leader's takeover grace runs out, then their waiters get them;\n", short(p.MaxTTL))
		fmt.Fprintf(e.stderr, "  - fencing tokens never go back: the next grant's token is above the backup's %d and the cluster's.\n", p.LastToken)
	}
	if !force {
		fmt.Fprint(e.stderr, "Restore? [y/N] ")
		answer, _ := bufio.NewReader(e.stdin).ReadString('\n')
		if a := strings.ToLower(strings.TrimSpace(answer)); a != "y" && a != "yes" {
			fmt.Fprintln(e.stderr)
			return exitError, fmt.Errorf("not restored: not confirmed (answer y, or pass -force)")
		}
	}
	var out admin.RestoreResponse
	if err := e.c.call(ctx, "POST", "/v1/admin/snapshot", bytes.NewReader(data), &out, 5*time.Minute); err != nil {
		return exitError, err
	}
	return 0, e.emit(out, func(t *tabwriter.Writer) {
		row(t, "restored", file)
		row(t, "sessions / locks / held / waiters", fmt.Sprintf("%d / %d / %d / %d", out.Sessions, out.Locks, out.Held, out.Waiters))
		row(t, "last token", fmt.Sprintf("%d (the backup's: %d; tokens never go back)", out.LastToken, out.BackupLastToken))
	})
}

// count says "1 lock", "2 locks".
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func writeFileAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
