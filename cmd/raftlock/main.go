// Command raftlock is the command-line client of a raftlock replica's admin
// API (package admin; examples/replica serves it, and so does any program
// that mounts it).
//
//	raftlock [global flags] lock [flags] NAME -- CMD [ARGS...]
//	raftlock status | members
//	raftlock locks [-after NAME] [-limit N] [PREFIX] | sessions [-after ID] [-limit N]
//	raftlock revoke [-token-of N] [-why TEXT] NAME
//	raftlock snapshot save FILE | snapshot restore [-force] FILE
//	raftlock leader transfer [ID]
//	raftlock peer remove ID
//	raftlock help [COMMAND]
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
// `raftlock help COMMAND` and `raftlock COMMAND -h` print a command's help
// (to stdout, exit 0, without contacting the replica).
//
// Exit status: 0 success; 1 an error (the API's answer is printed); 2 a
// usage error (one line on stderr naming the flag or argument, in the
// units it was typed); lock: CMD's exit status, 3 when the lock was not
// acquired (held with -try, or -wait passed), 4 when the lease was lost
// while CMD ran (CMD was signalled; see lock.go), 127 when CMD could not be
// started.
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
	code := run(ctx, os.Args[1:], os.Getenv, stdio{os.Stdin, os.Stdout, os.Stderr})
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
	exitNoCommand   = 127 // lock: CMD could not be started (as a shell says)
)

// errUsage marks a usage mistake: the command line, not the cluster, is
// wrong (exit 2).
var errUsage = errors.New("usage")

// usageErr is a usage mistake with its one-line message.
func usageErr(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errUsage}, args...)...)
}

// stdio is the process's standard streams as the commands see them.
type stdio struct {
	in       io.Reader
	out, err io.Writer
}

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
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	g      globals
	c      *client
}

// globalFlags declares the global flags on fs.
func (e *env) globalFlags(fs *flag.FlagSet, tokenFile *string, timeout *durationFlag) {
	addr := e.getenv("RAFTLOCK_ADDR")
	if addr == "" {
		addr = "http://127.0.0.1:8080"
	}
	fs.StringVar(&e.g.addr, "addr", addr, "the replica's admin API `URL` (RAFTLOCK_ADDR)")
	fs.StringVar(tokenFile, "token-file", e.getenv("RAFTLOCK_ADMIN_TOKEN_FILE"), "`file` holding the bearer token (RAFTLOCK_ADMIN_TOKEN_FILE; or the token in RAFTLOCK_ADMIN_TOKEN)")
	fs.StringVar(&e.g.ca, "ca", e.getenv("RAFTLOCK_CA"), "HTTPS: PEM `file` of the CA to trust (RAFTLOCK_CA)")
	fs.StringVar(&e.g.cert, "cert", e.getenv("RAFTLOCK_CERT"), "HTTPS: PEM client certificate `file` (RAFTLOCK_CERT)")
	fs.StringVar(&e.g.key, "key", e.getenv("RAFTLOCK_KEY"), "HTTPS: PEM key `file` of -cert (RAFTLOCK_KEY)")
	fs.StringVar(&e.g.output, "o", "table", "output: table or json")
	timeout.d = 15 * time.Second
	fs.Var(timeout, "timeout", "per-request timeout (a `duration`)")
}

// run runs one command line and returns the exit status.
func run(ctx context.Context, args []string, getenv func(string) string, std stdio) int {
	e := &env{getenv: getenv, stdin: std.in, stdout: std.out, stderr: std.err}
	fs := flag.NewFlagSet("raftlock", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // mistakes are reported once, below
	var tokenFile string
	var timeout durationFlag
	e.globalFlags(fs, &tokenFile, &timeout)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			e.topHelp(e.stdout)
			return exitOK
		}
		return e.usage("", usageErr("%v (raftlock help lists the global flags)", err))
	}
	if fs.NArg() == 0 {
		e.topHelp(e.stderr)
		return exitUsage
	}
	name, rest := fs.Arg(0), fs.Args()[1:]
	if name == "help" {
		return e.help(rest)
	}
	cmd, ok := lookup(name)
	if !ok {
		return e.usage("", usageErr("unknown command %q (raftlock help lists them)", name))
	}
	act, err := cmd.parseArgs(e, rest)
	switch {
	case errors.Is(err, flag.ErrHelp):
		cmd.printHelp(e, e.stdout)
		return exitOK
	case err != nil:
		return e.usage(name, err)
	}
	if err := e.checkGlobals(tokenFile, timeout); err != nil {
		return e.usage("", err)
	}
	c, err := newClient(e.g)
	if err != nil {
		return e.usage("", err)
	}
	defer c.close()
	e.c = c
	code, err := act(ctx)
	switch {
	case err == nil:
		return code
	case errors.Is(err, errUsage):
		return e.usage(name, err)
	default:
		fmt.Fprintf(e.stderr, "raftlock %s: %s\n", shown(name), shown(err))
		if code != 0 {
			return code
		}
		return exitError
	}
}

// usage prints a usage mistake (one line) and returns exitUsage.
func (e *env) usage(cmd string, err error) int {
	msg := strings.TrimPrefix(err.Error(), errUsage.Error()+": ")
	prefix := "raftlock"
	if cmd != "" {
		prefix += " " + cmd
	}
	fmt.Fprintf(e.stderr, "%s: %s\n", prefix, shown(msg))
	return exitUsage
}

// checkGlobals checks the global flags and reads the token file.
func (e *env) checkGlobals(tokenFile string, timeout durationFlag) error {
	e.g.timeout = timeout.d
	e.g.token = e.getenv("RAFTLOCK_ADMIN_TOKEN")
	switch {
	case e.g.output != "table" && e.g.output != "json":
		return usageErr("-o %s: want table or json", e.g.output)
	case e.g.cert != "" && e.g.key == "":
		return usageErr("-cert %s needs -key (RAFTLOCK_KEY): the key of the client certificate", e.g.cert)
	case e.g.key != "" && e.g.cert == "":
		return usageErr("-key %s needs -cert (RAFTLOCK_CERT): the client certificate of the key", e.g.key)
	case timeout.d <= 0:
		return usageErr("-timeout %s: want a positive duration, such as 15s", timeout.typed())
	}
	if tokenFile != "" {
		b, err := os.ReadFile(tokenFile)
		if err != nil {
			return usageErr("-token-file: %v", err)
		}
		e.g.token = strings.TrimRight(string(b), "\r\n ")
	}
	return nil
}
