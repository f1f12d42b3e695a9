// Command raftlock is the command-line client of a raftlock replica's admin
// API (package admin; examples/replica serves it, and so does any program
// that mounts it).
//
//	raftlock [global flags] lock [flags] NAME -- CMD [ARGS...]
//	raftlock status | members
//	raftlock locks [-after NAME] [-limit N] [PREFIX] | sessions [-after ID] [-limit N]
//	raftlock revoke [-token-of N] [-why TEXT] NAME
//	raftlock snapshot save FILE | snapshot restore FILE
//	raftlock leader transfer [ID]
//	raftlock peer remove ID
//
// Global flags (each also from an environment variable):
//
//	-addr URL     the replica's admin API (RAFTLOCK_ADDR, default http://127.0.0.1:8080)
//	-token-file F a file holding the bearer token (RAFTLOCK_ADMIN_TOKEN_FILE);
//	              or the token itself in RAFTLOCK_ADMIN_TOKEN
//	-ca, -cert, -key  HTTPS: the CA to trust, a client certificate and key
//	-o table|json output for people (default) or for scripts
//	-timeout D    per request (default 15s)
//
// Exit status: 0 success; 1 an error (the API's answer is printed); 2 a
// usage error; lock: CMD's exit status, 3 when the lock was not acquired
// (held with -try, or -wait passed), 4 when the lease was lost while CMD
// ran (CMD was signalled; see lock.go).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Exit statuses besides a command's own.
const (
	exitOK          = 0
	exitError       = 1
	exitUsage       = 2
	exitNotAcquired = 3
	exitLeaseLost   = 4
)

var errUsage = errors.New("usage")

// globals are the flags every command takes.
type globals struct {
	addr    string
	token   string
	ca      string
	cert    string
	key     string
	output  string
	timeout time.Duration
}

// env is the process environment as the commands see it.
type env struct {
	getenv func(string) string
	stdout io.Writer
	stderr io.Writer
	g      globals
	c      *client
}

const usageText = `usage: raftlock [global flags] COMMAND [ARGS]

commands:
  lock [flags] NAME -- CMD [ARGS...]  run CMD while holding lock NAME (raftlock lock -h)
  status                              this replica: leader, readiness, fault tolerance, warnings
  members                             every member, its role, state and lag
  locks [-after NAME] [-limit N] [PREFIX]  a page of locks with holders, tokens, lease time left, waiters
  sessions [-after ID] [-limit N]     a page of sessions with lease time left
  revoke [-token-of N] [-why TEXT] NAME   force-release a lock, or one reader or permit holder (admin)
  snapshot save FILE | restore FILE   back up or restore the lock table (admin)
  leader transfer [ID]                move the leadership (admin)
  peer remove ID                      remove a dead server (admin)

global flags:
`

// run runs one command line and returns the exit status.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	e := &env{getenv: getenv, stdout: stdout, stderr: stderr}
	fs := flag.NewFlagSet("raftlock", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := getenv("RAFTLOCK_ADDR")
	if addr == "" {
		addr = "http://127.0.0.1:8080"
	}
	fs.StringVar(&e.g.addr, "addr", addr, "the replica's admin API `URL` (RAFTLOCK_ADDR)")
	tokenFile := fs.String("token-file", getenv("RAFTLOCK_ADMIN_TOKEN_FILE"), "`file` holding the bearer token (RAFTLOCK_ADMIN_TOKEN_FILE; or the token in RAFTLOCK_ADMIN_TOKEN)")
	fs.StringVar(&e.g.ca, "ca", getenv("RAFTLOCK_CA"), "HTTPS: PEM `file` of the CA to trust (RAFTLOCK_CA)")
	fs.StringVar(&e.g.cert, "cert", getenv("RAFTLOCK_CERT"), "HTTPS: PEM client certificate `file` (RAFTLOCK_CERT)")
	fs.StringVar(&e.g.key, "key", getenv("RAFTLOCK_KEY"), "HTTPS: PEM key `file` of -cert (RAFTLOCK_KEY)")
	fs.StringVar(&e.g.output, "o", "table", "output: table or json")
	fs.DurationVar(&e.g.timeout, "timeout", 15*time.Second, "per-request timeout")
	fs.Usage = func() {
		fmt.Fprint(stderr, usageText)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	e.g.token = getenv("RAFTLOCK_ADMIN_TOKEN")
	if *tokenFile != "" {
		b, err := os.ReadFile(*tokenFile)
		if err != nil {
			fmt.Fprintln(stderr, "raftlock: -token-file:", err)
			return exitUsage
		}
		e.g.token = string(trimSpace(b))
	}
	if e.g.output != "table" && e.g.output != "json" {
		fmt.Fprintf(stderr, "raftlock: -o %q: want table or json\n", e.g.output)
		return exitUsage
	}
	if (e.g.cert == "") != (e.g.key == "") || e.g.timeout <= 0 {
		fmt.Fprintln(stderr, "raftlock: -cert and -key go together; -timeout must be positive")
		return exitUsage
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return exitUsage
	}
	c, err := newClient(e.g)
	if err != nil {
		fmt.Fprintln(stderr, "raftlock:", err)
		return exitUsage
	}
	defer c.close()
	e.c = c
	cmd, rest := fs.Arg(0), fs.Args()[1:]
	var code int
	switch cmd {
	case "lock":
		code, err = e.lock(ctx, rest)
	case "status":
		err = e.noArgs(rest, e.status, ctx)
	case "members":
		err = e.noArgs(rest, e.members, ctx)
	case "locks":
		err = e.locks(ctx, rest)
	case "sessions":
		err = e.sessions(ctx, rest)
	case "revoke":
		err = e.revoke(ctx, rest)
	case "snapshot":
		err = e.snapshot(ctx, rest)
	case "leader":
		err = e.leader(ctx, rest)
	case "peer":
		err = e.peer(ctx, rest)
	default:
		err = fmt.Errorf("%w: unknown command %q (raftlock -h lists them)", errUsage, cmd)
	}
	switch {
	case err == nil:
		return code
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.Is(err, errUsage):
		fmt.Fprintln(stderr, "raftlock:", shown(err))
		return exitUsage
	default:
		fmt.Fprintf(stderr, "raftlock %s: %s\n", shown(cmd), shown(err))
		if code != 0 {
			return code
		}
		return exitError
	}
}

func (e *env) noArgs(args []string, f func(context.Context) error, ctx context.Context) error {
	if len(args) > 0 {
		if strings.HasPrefix(args[0], "-") {
			return fmt.Errorf("%w: unexpected arguments %q (global flags such as -addr and -o go before the command: raftlock -addr URL status)", errUsage, args)
		}
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, args)
	}
	return f(ctx)
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r' || b[len(b)-1] == ' ') {
		b = b[:len(b)-1]
	}
	return b
}
