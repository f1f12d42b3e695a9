package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// noNetwork is an admin API that no command line of these tests may reach:
// it counts the requests it gets.
func noNetwork(t *testing.T) (addr string, requests *atomic.Int32) {
	requests = new(atomic.Int32)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		http.Error(w, "no request expected", http.StatusTeapot)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, requests
}

// runLocal runs a command line against addr with stdin and returns what it
// printed and its exit status.
func runLocal(addr, stdin string, args ...string) (stdout, stderr string, code int) {
	var o, e strings.Builder
	env := map[string]string{"RAFTLOCK_ADDR": addr, "RAFTLOCK_ADMIN_TOKEN": "test-token-0123456789"}
	code = run(context.Background(), args, func(k string) string { return env[k] }, stdio{strings.NewReader(stdin), &o, &e})
	return o.String(), e.String(), code
}

// raftlock help, raftlock help CMD and CMD -h work for every command: the
// help on stdout, exit 0, nothing on stderr, no request to the replica.
// (status, members and sessions -h were usage errors; locks -h listed the
// locks with the prefix "-h"; help was an unknown command.)
func TestHelpForEveryCommand(t *testing.T) {
	addr, requests := noNetwork(t)
	lines := [][]string{{"help"}, {"-h"}, {"--help"}}
	for _, c := range commands {
		lines = append(lines, []string{"help", c.name}, []string{c.name, "-h"}, []string{c.name, "--help"}, []string{c.name, "-help"})
	}
	lines = append(lines, []string{"snapshot", "restore", "-h"}, []string{"snapshot", "save", "-h"}, []string{"leader", "transfer", "-h"},
		[]string{"peer", "remove", "-h"}, []string{"locks", "-h"}, []string{"revoke", "job", "-h"}, []string{"lock", "-ttl", "5s", "-h"})
	for _, args := range lines {
		out, errOut, code := runLocal(addr, "", args...)
		want := "usage: raftlock [global flags] "
		if len(args) == 1 || args[0] == "help" && len(args) == 1 {
			want += "COMMAND"
		} else if args[0] == "help" {
			want += args[1] + " "
		} else {
			want += args[0] + " "
		}
		if code != 0 || errOut != "" || !strings.HasPrefix(out, want) {
			t.Errorf("raftlock %s: exit %d, stderr %q, stdout starts %q; want exit 0 and %q on stdout", strings.Join(args, " "), code, errOut, firstLine(out), want)
		}
	}
	for _, c := range commands {
		out, _, _ := runLocal(addr, "", "help")
		if !strings.Contains(out, "\n  "+c.name+" ") {
			t.Errorf("raftlock help does not list %s:\n%s", c.name, out)
		}
	}
	if out, _, _ := runLocal(addr, "", "help", "lock"); !strings.Contains(out, "-lock-delay duration") || !strings.Contains(out, "127 CMD could not be started") {
		t.Errorf("raftlock help lock lacks -lock-delay or the exit statuses:\n%s", out)
	}
	if n := requests.Load(); n != 0 {
		t.Errorf("help made %d requests to the replica", n)
	}
}

func firstLine(s string) string { l, _, _ := strings.Cut(s, "\n"); return l }

// One message per mistake, in the units typed, naming the flag; exit 2;
// nothing sent to the replica. (Before: "-timeout 0" said "-cert and -key
// go together; -timeout must be positive", "-grace 20s" said "less than
// 2.333333333s", "revoke -token-of abc" printed its error twice with the
// flag list between.)
func TestFlagMistakes(t *testing.T) {
	addr, requests := noNetwork(t)
	missing := filepath.Join(t.TempDir(), "nope")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-timeout", "0", "status"}, "raftlock: -timeout 0: want a positive duration, such as 15s"},
		{[]string{"-timeout", "soon", "status"}, `raftlock: invalid value "soon" for flag -timeout: want a duration such as 10s, 1m30s or 500ms (raftlock help lists the global flags)`},
		{[]string{"-cert", "c.pem", "status"}, "raftlock: -cert c.pem needs -key (RAFTLOCK_KEY): the key of the client certificate"},
		{[]string{"-key", "k.pem", "status"}, "raftlock: -key k.pem needs -cert (RAFTLOCK_CERT): the client certificate of the key"},
		{[]string{"-o", "yaml", "status"}, "raftlock: -o yaml: want table or json"},
		{[]string{"-token-file", missing, "status"}, "raftlock: -token-file: open " + missing + ": no such file or directory"},
		{[]string{"-addr", "ftp://x", "status"}, `raftlock: -addr "ftp://x": want http(s)://host:port`},
		{[]string{"frobnicate"}, `raftlock: unknown command "frobnicate" (raftlock help lists them)`},
		{[]string{"help", "frobnicate"}, `raftlock help: unknown command "frobnicate" (raftlock help lists them)`},
		{[]string{"status", "-o", "json"}, "raftlock status: -o is a global flag: it goes before the command (raftlock -o ... status)"},
		{[]string{"status", "now"}, `raftlock status: unexpected argument "now"`},
		{[]string{"locks", "a", "b"}, `raftlock locks: want at most one PREFIX, not ["a" "b"]`},
		{[]string{"locks", "-limit", "0"}, "raftlock locks: -limit 0: want 1 to 1000"},
		{[]string{"sessions", "-after", "x"}, `raftlock sessions: invalid value "x" for flag -after: want a session id, a number (raftlock sessions shows them)`},
		{[]string{"sessions", "-limit", "5000"}, "raftlock sessions: -limit 5000: want 1 to 1000"},
		{[]string{"revoke", "-token-of", "abc", "job"}, `raftlock revoke: invalid value "abc" for flag -token-of: want a fencing token, a number (raftlock locks shows them)`},
		{[]string{"revoke"}, `raftlock revoke: want one lock NAME, not []`},
		{[]string{"snapshot", "load", "f"}, `raftlock snapshot: want save FILE or restore [-force] FILE, not ["load" "f"]`},
		{[]string{"snapshot", "save", "-force", "f"}, "raftlock snapshot: -force is for restore (save overwrites FILE anyway)"},
		{[]string{"leader", "elect"}, `raftlock leader: want transfer [ID], not ["elect"]`},
		{[]string{"peer", "remove"}, `raftlock peer: want remove ID, not ["remove"]`},
		{[]string{"lock", "x"}, `raftlock lock: want NAME -- CMD [ARGS...], not ["x"] (raftlock help lock)`},
		{[]string{"lock", "x", "--"}, `raftlock lock: want NAME -- CMD [ARGS...], not ["x" "--"] (raftlock help lock)`},
		{[]string{"lock", "-ttl", "0", "x", "--", "true"}, "raftlock lock: -ttl 0: want a positive duration, such as 10s"},
		{[]string{"lock", "-ttl", "25h", "x", "--", "true"}, "raftlock lock: -ttl 25h: want at most 24h"},
		{[]string{"lock", "-ttl", "soon", "x", "--", "true"}, `raftlock lock: invalid value "soon" for flag -ttl: want a duration such as 10s, 1m30s or 500ms`},
		{[]string{"lock", "-grace", "20s", "x", "--", "true"}, "raftlock lock: -grace 20s: want less than 2.33s with -ttl 10s (a third of the TTL, less the TTL/10 kill margin)"},
		{[]string{"lock", "-ttl", "90s", "-grace", "30s", "x", "--", "true"}, "raftlock lock: -grace 30s: want less than 21s with -ttl 90s (a third of the TTL, less the TTL/10 kill margin)"},
		{[]string{"lock", "-grace", "-1s", "x", "--", "true"}, "raftlock lock: -grace -1s: want a positive duration (default a fifth of -ttl)"},
		{[]string{"lock", "-wait", "-5s", "x", "--", "true"}, "raftlock lock: -wait -5s: want 0 (wait as long as it takes) or a positive duration"},
		{[]string{"lock", "-try", "-wait", "5s", "x", "--", "true"}, "raftlock lock: -try and -wait exclude each other"},
		{[]string{"lock", "-n", "-2", "x", "--", "true"}, `raftlock lock: invalid value "-2" for flag -n: want the number of holders a semaphore admits (0: a lock)`},
		{[]string{"lock", "-lock-delay", "2h", "x", "--", "true"}, "raftlock lock: -lock-delay 2h: want 0 to 1h"},
		{[]string{"lock", "-frobnicate", "x", "--", "true"}, "raftlock lock: flag provided but not defined: -frobnicate"},
	} {
		out, errOut, code := runLocal(addr, "", tc.args...)
		if code != exitUsage || errOut != tc.want+"\n" || out != "" {
			t.Errorf("raftlock %s: exit %d\nstderr %q\nwant   %q (exit 2, nothing on stdout; stdout %q)", strings.Join(tc.args, " "), code, errOut, tc.want+"\n", out)
		}
	}
	if n := requests.Load(); n != 0 {
		t.Errorf("mistakes made %d requests to the replica", n)
	}
}
