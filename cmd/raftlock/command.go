package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/raftlock/raftlock/admin"
)

// runner runs a parsed command against the replica and returns its exit
// status (0 unless the command has its own, as lock does).
type runner func(ctx context.Context) (int, error)

// command is one raftlock command: its help, and how it reads its
// arguments. Reading them touches nothing: the network is used only by the
// runner, after every argument has been checked.
type command struct {
	name     string
	synopsis string // what follows the name in a usage line
	summary  string // one line, in raftlock help
	help     string // more, in raftlock help NAME ("" none)
	// flagsFirst: the flags end at the first positional argument (lock,
	// whose CMD has flags of its own); otherwise they may also follow the
	// positional arguments (revoke NAME -why x, leader transfer -h).
	flagsFirst bool
	// setup declares the command's flags on fs and returns the reader of
	// its positional arguments.
	setup func(e *env, fs *flag.FlagSet) func(args []string) (runner, error)
}

// commands in the order raftlock help lists them.
var commands []command

func init() {
	commands = []command{
		lockCommand,
		{name: "status", summary: "this replica: leader, readiness, fault tolerance, warnings",
			help:  "Exits 1 when the replica is not ready (no leader known, or behind the log); the reasons are printed.",
			setup: noArgs(func(e *env, ctx context.Context) error { return e.status(ctx) })},
		{name: "members", summary: "every member, its role, state and lag",
			setup: noArgs(func(e *env, ctx context.Context) error { return e.members(ctx) })},
		{name: "locks", synopsis: "[-after NAME] [-limit N] [PREFIX]", summary: "a page of locks with holders, tokens, lease time left, waiters",
			help:  "Lists the locks whose names start with PREFIX (all without one), as the leader sees them now;\nthe last row says how to ask for the next page.",
			setup: locksArgs},
		{name: "sessions", synopsis: "[-after ID] [-limit N]", summary: "a page of sessions with lease time left",
			help:  "The last row says how to ask for the next page.",
			setup: sessionsArgs},
		{name: "revoke", synopsis: "[-token-of N] [-why TEXT] NAME", summary: "force-release a lock, or one reader or permit holder (admin)",
			help: "The holder's lease ends at once: a raftlock lock holding it signals its command, and the fencing token\n" +
				"of the next grant is higher, so the resources NAME protects refuse the revoked holder's writes.",
			setup: revokeArgs},
		restoreCommand,
		{name: "leader", synopsis: "transfer [ID]", summary: "move the leadership to ID, or to the most caught-up voter (admin)",
			setup: leaderArgs},
		{name: "peer", synopsis: "remove ID", summary: "remove a dead server from the cluster (admin)",
			help:  "Refused while ID is alive, or when removing it would cost the cluster its quorum.",
			setup: peerArgs},
	}
}

func lookup(name string) (command, bool) {
	for _, c := range commands {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

// globalFlagNames are the flags that go before the command.
var globalFlagNames = []string{"addr", "token-file", "ca", "cert", "key", "o", "timeout"}

// parseArgs reads the command's flags and arguments: flag.ErrHelp for -h,
// a usage error (one message) for a mistake, else what to run.
func (c command) parseArgs(e *env, args []string) (runner, error) {
	fs := flag.NewFlagSet("raftlock "+c.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // mistakes are reported once, by run
	finish := c.setup(e, fs)
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			if name, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: -"); ok && slices.Contains(globalFlagNames, name) {
				return nil, usageErr("-%s is a global flag: it goes before the command (raftlock -%s ... %s)", name, name, c.name)
			}
			return nil, usageErr("%v", err)
		}
		if c.flagsFirst || fs.NArg() == 0 {
			pos = append(pos, fs.Args()...)
			break
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
	return finish(pos)
}

// printHelp writes the command's help: usage line, summary, details, flags.
func (c command) printHelp(e *env, w io.Writer) {
	fmt.Fprintf(w, "usage: raftlock [global flags] %s %s\n\n%s.\n", c.name, c.synopsis, upper(c.summary))
	if c.help != "" {
		fmt.Fprintf(w, "\n%s\n", c.help)
	}
	fs := flag.NewFlagSet("raftlock "+c.name, flag.ContinueOnError)
	c.setup(e, fs)
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	if n > 0 {
		fmt.Fprintln(w, "\nflags:")
		fs.SetOutput(w)
		fs.PrintDefaults()
	}
	fmt.Fprintln(w, "\nGlobal flags (raftlock help lists them) go before the command.")
}

func upper(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// topHelp writes raftlock's usage: the commands and the global flags.
func (e *env) topHelp(w io.Writer) {
	fmt.Fprint(w, "usage: raftlock [global flags] COMMAND [ARGS]\n\ncommands:\n")
	t := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, c := range commands {
		fmt.Fprintf(t, "  %s %s\t%s\n", c.name, c.synopsis, c.summary)
	}
	fmt.Fprintf(t, "  help [COMMAND]\tthis text, or a command's flags (also: raftlock COMMAND -h)\n")
	t.Flush()
	fmt.Fprint(w, "\nglobal flags:\n")
	fs := flag.NewFlagSet("raftlock", flag.ContinueOnError)
	var tokenFile string
	var timeout durationFlag
	e.globalFlags(fs, &tokenFile, &timeout)
	fs.SetOutput(w)
	fs.PrintDefaults()
}

// help is raftlock help [COMMAND].
func (e *env) help(args []string) int {
	switch {
	case len(args) == 0:
		e.topHelp(e.stdout)
		return exitOK
	case len(args) > 1:
		return e.usage("help", usageErr("want at most one COMMAND, not %q", args))
	}
	c, ok := lookup(args[0])
	if !ok {
		return e.usage("help", usageErr("unknown command %q (raftlock help lists them)", args[0]))
	}
	c.printHelp(e, e.stdout)
	return exitOK
}

// noArgs is the setup of a command without flags or arguments.
func noArgs(f func(e *env, ctx context.Context) error) func(e *env, fs *flag.FlagSet) func([]string) (runner, error) {
	return func(e *env, fs *flag.FlagSet) func([]string) (runner, error) {
		return func(args []string) (runner, error) {
			if len(args) > 0 {
				return nil, usageErr("unexpected argument %q", args[0])
			}
			return func(ctx context.Context) (int, error) { return 0, f(e, ctx) }, nil
		}
	}
}

// maxPage is the most locks or sessions one listing asks for (the API's
// limit).
const maxPage = 1000

// pageFlags declares -limit on fs and returns its check.
func pageFlags(fs *flag.FlagSet, what string) (*countFlag, func() error) {
	limit := &countFlag{n: maxPage, what: fmt.Sprintf("the number of %s to list (1 to %d)", what, maxPage)}
	fs.Var(limit, "limit", fmt.Sprintf("list at most `N` %s (1 to %d)", what, maxPage))
	return limit, func() error {
		if limit.n < 1 || limit.n > maxPage {
			return usageErr("-limit %d: want 1 to %d", limit.n, maxPage)
		}
		return nil
	}
}

func locksArgs(e *env, fs *flag.FlagSet) func([]string) (runner, error) {
	after := fs.String("after", "", "list the locks after this `name` (the next page)")
	limit, checkLimit := pageFlags(fs, "locks")
	return func(args []string) (runner, error) {
		if len(args) > 1 {
			return nil, usageErr("want at most one PREFIX, not %q", args)
		}
		if err := checkLimit(); err != nil {
			return nil, err
		}
		prefix := ""
		if len(args) == 1 {
			prefix = args[0]
		}
		return func(ctx context.Context) (int, error) { return 0, e.locks(ctx, prefix, *after, int(limit.n)) }, nil
	}
}

func sessionsArgs(e *env, fs *flag.FlagSet) func([]string) (runner, error) {
	after := &countFlag{what: "a session id, a number (raftlock sessions shows them)"}
	fs.Var(after, "after", "list the sessions after this `id` (the next page)")
	limit, checkLimit := pageFlags(fs, "sessions")
	return func(args []string) (runner, error) {
		if len(args) > 0 {
			return nil, usageErr("unexpected argument %q", args[0])
		}
		if err := checkLimit(); err != nil {
			return nil, err
		}
		return func(ctx context.Context) (int, error) { return 0, e.sessions(ctx, after.n, int(limit.n)) }, nil
	}
}

// revoke: force-release NAME (its one grant, or -token-of N's: the
// exclusive holder, a reader or a semaphore's permit holder).
func revokeArgs(e *env, fs *flag.FlagSet) func([]string) (runner, error) {
	token := &countFlag{what: "a fencing token, a number (raftlock locks shows them)"}
	fs.Var(token, "token-of", "revoke only the grant with this fencing `token`: the holder, a reader or a permit holder (0: the lock's one grant)")
	why := fs.String("why", "", "reason, written into the log with who revoked it")
	return func(args []string) (runner, error) {
		if len(args) != 1 {
			return nil, usageErr("want one lock NAME, not %q", args)
		}
		return func(ctx context.Context) (int, error) { return 0, e.revoke(ctx, args[0], token.n, *why) }, nil
	}
}

func (e *env) revoke(ctx context.Context, name string, token uint64, why string) error {
	var out admin.RevokeResponse
	if err := e.c.call(ctx, "POST", "/v1/admin/revoke", admin.RevokeRequest{Lock: name, Token: token, Why: why}, &out, 0); err != nil {
		return err
	}
	return e.emit(out, func(t *tabwriter.Writer) {
		row(t, "revoked", out.Lock)
		row(t, "grant", out.Kind)
		row(t, "holder", fmt.Sprintf("session %d %s", out.Holder.Session, out.Holder.Description))
		row(t, "token", out.Holder.Token)
		row(t, "log index", out.Index)
		row(t, "by", out.By)
	})
}

func leaderArgs(e *env, fs *flag.FlagSet) func([]string) (runner, error) {
	return func(args []string) (runner, error) {
		if len(args) < 1 || len(args) > 2 || args[0] != "transfer" {
			return nil, usageErr("want transfer [ID], not %q", args)
		}
		to := ""
		if len(args) == 2 {
			to = args[1]
		}
		return func(ctx context.Context) (int, error) { return 0, e.transfer(ctx, to) }, nil
	}
}

func (e *env) transfer(ctx context.Context, to string) error {
	var out struct {
		LeaderID string `json:"leader_id"`
	}
	if err := e.c.call(ctx, "POST", "/v1/admin/transfer-leadership", admin.TransferRequest{To: to}, &out, 30*time.Second); err != nil {
		return err
	}
	if to != "" && out.LeaderID != to {
		return fmt.Errorf("the leadership went to %q, not %q (an election intervened): try again", out.LeaderID, to)
	}
	return e.emit(out, func(t *tabwriter.Writer) { row(t, "leader", out.LeaderID) })
}

func peerArgs(e *env, fs *flag.FlagSet) func([]string) (runner, error) {
	return func(args []string) (runner, error) {
		if len(args) != 2 || args[0] != "remove" {
			return nil, usageErr("want remove ID, not %q", args)
		}
		return func(ctx context.Context) (int, error) { return 0, e.removePeer(ctx, args[1]) }, nil
	}
}

func (e *env) removePeer(ctx context.Context, id string) error {
	var out map[string]any
	if err := e.c.call(ctx, "POST", "/v1/admin/remove-peer", admin.RemovePeerRequest{NodeID: id}, &out, time.Minute); err != nil {
		return err
	}
	return e.emit(out, func(t *tabwriter.Writer) { row(t, "removed", id) })
}
