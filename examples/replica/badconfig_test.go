package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/raftlock/raftlock/internal/nodeopts"
	"github.com/raftlock/raftlock/internal/testing/ports"
	"github.com/raftlock/raftlock/node"
)

// goNames are the Go spellings of settings that a replica's user never
// typed: a configuration error names flags and environment variables.
var goNames = regexp.MustCompile(`\b(Gossip\.\w+|AllowPlaintext|BindAddr|AdvertiseAddr|BootstrapExpect|MaxVoters|ReapTimeout|DataDir|LogStore|` +
	`AllowedHosts|LockDelay|Unauthenticated|ClientCertRole|InMemory|Auth\.\w+|Config)\b|invalid config`)

// heldPorts holds the addresses a replica would bind (Raft TCP, gossip TCP
// and UDP, HTTP TCP) so that any bind it attempts fails.
func heldPorts(t *testing.T) (raft, gossip, http string) {
	t.Helper()
	addrs, err := ports.Free(3)
	if err != nil {
		t.Fatal(err)
	}
	for i, a := range addrs {
		ln, err := net.Listen("tcp", a)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		if i == 1 {
			pc, err := net.ListenPacket("udp", a)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { pc.Close() })
		}
	}
	return addrs[0], addrs[1], addrs[2]
}

// Every configuration error a replica's user can meet — a flag, a variable,
// a file a flag names, and what node.Config and admin.Config refuse — is
// found before the replica touches its data dir or the network: it exits 2
// (errUsage) with one line that names the flag and its variable, the data
// dir does not exist afterwards, and nothing was bound. Each case runs
// twice: with every address the replica would bind held by the test (an
// attempt would fail with another error), and with the addresses free (a
// replica that got as far as its node would write its data dir). A
// too-short admin token used to found a cluster in the data dir and only
// then exit 2; the image's environment without TLS exited 1 after creating
// its Raft store.
func TestBadConfigTouchesNothing(t *testing.T) {
	t.Run("addresses held", func(t *testing.T) {
		raft, gossip, http := heldPorts(t)
		testBadConfigs(t, raft, gossip, http)
	})
	t.Run("addresses free", func(t *testing.T) {
		addrs, err := ports.Free(3)
		if err != nil {
			t.Fatal(err)
		}
		testBadConfigs(t, addrs[0], addrs[1], addrs[2])
	})
}

func testBadConfigs(t *testing.T, raft, gossip, http string) {
	dir := t.TempDir()
	certsDir := filepath.Join(dir, "certs")
	if err := certs([]string{"-dir", certsDir, "-names", "r1,r2"}, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	pem := func(f string) string { return filepath.Join(certsDir, f) }
	token := "a-good-admin-token-0123456789"
	gossipKey := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32))
	tls := []string{"-tls-ca", pem("ca.pem"), "-tls-cert", pem("r1.pem"), "-tls-key", pem("r1-key.pem"), "-gossip-key", gossipKey}

	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string // replaces the base environment's entries ("" removes one)
		want []string          // the message contains each
	}{
		{"no id", nil, map[string]string{"RAFTLOCK_ID": ""}, []string{"-id (RAFTLOCK_ID) is required"}},
		{"no data dir", nil, map[string]string{"RAFTLOCK_DATA_DIR": ""}, []string{"-data-dir (RAFTLOCK_DATA_DIR) is required"}},
		{"empty bind", []string{"-bind", ""}, nil, []string{"-bind (RAFTLOCK_BIND) is required"}},
		{"empty gossip", []string{"-gossip", ""}, nil, []string{"-gossip (RAFTLOCK_GOSSIP) is required"}},
		{"http without a port", []string{"-http", "localhost"}, nil, []string{"-http (RAFTLOCK_HTTP) \"localhost\": want host:port"}},
		{"unknown timing", []string{"-timing", "wan"}, nil, []string{"-timing (RAFTLOCK_TIMING) \"wan\": want lan, fast or test"}},
		{"unknown log store", nil, map[string]string{"RAFTLOCK_LOG_STORE": "sqlite"}, []string{"-log-store (RAFTLOCK_LOG_STORE) \"sqlite\""}},
		{"part of mutual TLS", []string{"-tls-ca", pem("ca.pem")}, nil, []string{"-tls-ca (RAFTLOCK_TLS_CA)", "-tls-cert (RAFTLOCK_TLS_CERT)", "-tls-key (RAFTLOCK_TLS_KEY)"}},
		{"the image's environment without TLS", nil, map[string]string{"RAFTLOCK_BIND": "0.0.0.0:" + port(raft)},
			[]string{"-bind (RAFTLOCK_BIND) \"0.0.0.0:", "not a loopback address", "-allow-plaintext (RAFTLOCK_ALLOW_PLAINTEXT=true)", "-tls-ca (RAFTLOCK_TLS_CA)"}},
		{"mutual TLS with gossip in clear text", tls[:6], nil, []string{"-gossip-key (RAFTLOCK_GOSSIP_KEY)", "-allow-unencrypted-gossip (RAFTLOCK_ALLOW_UNENCRYPTED_GOSSIP=true)"}},
		{"negative bootstrap-expect", []string{"-bootstrap-expect", "-1"}, nil, []string{"-bootstrap-expect (RAFTLOCK_BOOTSTRAP_EXPECT) -1"}},
		{"negative max-voters", []string{"-max-voters", "-1"}, nil, []string{"-max-voters (RAFTLOCK_MAX_VOTERS) -1"}},
		{"more founders than voters", []string{"-bootstrap-expect", "7"}, nil, []string{"-bootstrap-expect (RAFTLOCK_BOOTSTRAP_EXPECT) 7", "-max-voters (RAFTLOCK_MAX_VOTERS) 5"}},
		{"negative reap-timeout", nil, map[string]string{"RAFTLOCK_REAP_TIMEOUT": "-1s"}, []string{"-reap-timeout (RAFTLOCK_REAP_TIMEOUT) -1s"}},
		{"half of HTTPS", []string{"-http-tls-cert", pem("r1.pem")}, nil, []string{"-http-tls-cert (RAFTLOCK_HTTP_TLS_CERT)", "-http-tls-key (RAFTLOCK_HTTP_TLS_KEY)"}},
		{"client CA without HTTPS", []string{"-http-client-ca", pem("ca.pem")}, nil, []string{"-http-client-ca (RAFTLOCK_HTTP_CLIENT_CA) needs HTTPS"}},
		{"no authentication", nil, map[string]string{"RAFTLOCK_ADMIN_TOKEN": ""}, []string{"-admin-token (RAFTLOCK_ADMIN_TOKEN)", "-http-no-auth (RAFTLOCK_HTTP_NO_AUTH=true)"}},
		{"too short an admin token", nil, map[string]string{"RAFTLOCK_ADMIN_TOKEN": "short"}, []string{"-admin-token (RAFTLOCK_ADMIN_TOKEN) is 5 bytes long: want at least 16"}},
		{"unknown client-certificate role", []string{"-http-tls-cert", pem("r1.pem"), "-http-tls-key", pem("r1-key.pem"), "-http-client-ca", pem("ca.pem"), "-http-client-role", "root"}, nil,
			[]string{"-http-client-role (RAFTLOCK_HTTP_CLIENT_ROLE) \"root\""}},
		{"TTL over the maximum", []string{"-ttl", "25h"}, nil, []string{"-ttl (RAFTLOCK_TTL) 25h0m0s: want at most 24h0m0s"}},
		{"TTL below the timing's minimum", []string{"-ttl", "3s"}, nil, []string{"-ttl (RAFTLOCK_TTL) 3s: below the minimum 4.5s for -timing (RAFTLOCK_TIMING) lan"}},
		{"negative lock-delay", []string{"-lock-delay", "-1s"}, nil, []string{"-lock-delay (RAFTLOCK_LOCK_DELAY) -1s"}},
		{"a URL as an allowed host", []string{"-http-allowed-hosts", "http://raftlock.internal"}, nil, []string{"-http-allowed-hosts (RAFTLOCK_HTTP_ALLOWED_HOSTS) entry \"http://raftlock.internal\""}},
		{"unknown log level", []string{"-log-level", "loud"}, nil, []string{"-log-level (RAFTLOCK_LOG_LEVEL) \"loud\""}},
		{"a positional argument", []string{"r1"}, nil, []string{"unexpected arguments [\"r1\"]"}},
		{"a variable that is no duration", nil, map[string]string{"RAFTLOCK_TTL": "soon"}, []string{"RAFTLOCK_TTL=\"soon\""}},
		{"a flag that is no duration", []string{"-ttl", "soon"}, nil, []string{"-ttl"}},
		{"a gossip key that is no base64", []string{"-gossip-key", "!!!"}, nil, []string{"-gossip-key (RAFTLOCK_GOSSIP_KEY): not base64"}},
		{"a gossip key of 5 bytes", []string{"-gossip-key", base64.StdEncoding.EncodeToString([]byte("short"))}, nil, []string{"-gossip-key (RAFTLOCK_GOSSIP_KEY) is 5 bytes; want 16, 24 or 32"}},
		{"a join seed without a port", []string{"-join", "10.0.0.1"}, nil, []string{"-join (RAFTLOCK_JOIN) \"10.0.0.1\" is not host:port"}},
		{"an unspecified advertise address", []string{"-advertise", "0.0.0.0:7400"}, nil, []string{"-advertise (RAFTLOCK_ADVERTISE)", "unspecified address"}},
		{"a gossip advertise address without a port", nil, map[string]string{"RAFTLOCK_GOSSIP_ADVERTISE": "10.0.0.1"}, []string{"-gossip-advertise (RAFTLOCK_GOSSIP_ADVERTISE) \"10.0.0.1\""}},
		{"a gossip address without a port", []string{"-gossip", "127.0.0.1"}, nil, []string{"-gossip (RAFTLOCK_GOSSIP) \"127.0.0.1\""}},
		{"an id with a space", []string{"-id", "r 1"}, nil, []string{"-id (RAFTLOCK_ID) \"r 1\": want 1 to 64 letters"}},
		{"a bind address without a port", []string{"-bind", "127.0.0.1"}, nil, []string{"-bind (RAFTLOCK_BIND) \"127.0.0.1\" is not host:port"}},
		{"a missing CA file", append([]string{"-tls-ca", filepath.Join(dir, "nope.pem")}, tls[2:]...), nil, []string{"-tls-ca (RAFTLOCK_TLS_CA)", "no such file"}},
		{"a key of another certificate", append(append([]string{}, tls[:4]...), "-tls-key", pem("r2-key.pem"), "-gossip-key", gossipKey), nil,
			[]string{"-tls-cert (RAFTLOCK_TLS_CERT), -tls-key (RAFTLOCK_TLS_KEY)"}},
		{"a missing token file", []string{"-admin-token-file", filepath.Join(dir, "nope")}, nil, []string{"-admin-token-file (RAFTLOCK_ADMIN_TOKEN_FILE)", "no such file"}},
		{"a token file line of two fields", []string{"-admin-token-file", file("two", "ops admin\n")}, nil, []string{"-admin-token-file (RAFTLOCK_ADMIN_TOKEN_FILE) " + filepath.Join(dir, "two") + ":1: want \"name role secret\""}},
		{"a token file with a short secret", []string{"-admin-token-file", file("short", "# ops\n\nops admin short\n")}, nil, []string{"short:3: the secret of \"ops\" is 5 bytes long"}},
		{"a token file with an unknown role", []string{"-admin-token-file", file("role", "ops root "+token+"\n")}, nil, []string{"role:1: role \"root\": want read, lock or admin"}},
		{"a token file repeating the admin token", []string{"-admin-token-file", file("dup", "ops read "+token+"\n")}, nil, []string{"-admin-token-file (RAFTLOCK_ADMIN_TOKEN_FILE)", "the same secret twice"}},
		{"a missing HTTPS certificate", []string{"-http-tls-cert", filepath.Join(dir, "nope.pem"), "-http-tls-key", pem("r1-key.pem")}, nil, []string{"-http-tls-cert (RAFTLOCK_HTTP_TLS_CERT), -http-tls-key (RAFTLOCK_HTTP_TLS_KEY)"}},
		{"a missing client CA", []string{"-http-tls-cert", pem("r1.pem"), "-http-tls-key", pem("r1-key.pem"), "-http-client-ca", filepath.Join(dir, "nope.pem")}, nil,
			[]string{"-http-client-ca (RAFTLOCK_HTTP_CLIENT_CA)", "no such file"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := filepath.Join(t.TempDir(), "data")
			env := map[string]string{"RAFTLOCK_ID": "r1", "RAFTLOCK_DATA_DIR": data, "RAFTLOCK_BIND": raft, "RAFTLOCK_GOSSIP": gossip,
				"RAFTLOCK_HTTP": http, "RAFTLOCK_BOOTSTRAP_EXPECT": "1", "RAFTLOCK_ADMIN_TOKEN": token}
			for k, v := range tc.env {
				env[k] = v
			}
			var out bytes.Buffer
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			err := run(ctx, tc.args, envOf(env), &out)
			cancel()
			msg := out.String()
			if err != errUsage {
				t.Errorf("run: %v, want errUsage (exit 2)", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("the message lacks %q:\n%s", w, msg)
				}
			}
			if m := goNames.FindString(msg); m != "" {
				t.Errorf("the message speaks Go (%q), not flags:\n%s", m, msg)
			}
			if !strings.HasPrefix(msg, "replica: ") && !strings.Contains(tc.name, "flag that is no") {
				t.Errorf("not one message:\n%s", msg)
			} else if strings.HasPrefix(msg, "replica: ") && strings.Count(msg, "\n") != 1 {
				t.Errorf("more than one line:\n%s", msg)
			}
			if _, err := os.Stat(data); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the data dir exists after a configuration error (%v)", err)
			}
		})
	}
}

func port(addr string) string { _, p, _ := net.SplitHostPort(addr); return p }

// What node.Start refuses about the data dir is a configuration error too
// (restarting does not fix it): a data dir of another id exits 2, naming
// the flags.
func TestDataDirOfAnotherIDExits2(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	nc := node.DefaultConfig()
	nc.ID, nc.DataDir, nc.Bootstrap, nc.Timing = "r1", data, true, nodeopts.TestTiming()
	n, err := node.Start(context.Background(), nc)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	addrs, err := ports.Free(3)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err = run(context.Background(), []string{"-id", "r2", "-data-dir", data, "-bind", addrs[0], "-gossip", addrs[1], "-http", addrs[2],
		"-http-no-auth", "-timing", "test"}, envOf(nil), &out)
	if err != errUsage || !strings.Contains(out.String(), "belongs to node \"r1\"") || !strings.Contains(out.String(), "-id (RAFTLOCK_ID) \"r2\", -data-dir (RAFTLOCK_DATA_DIR) "+data) || goNames.MatchString(out.String()) {
		t.Errorf("run: %v, want errUsage naming the data dir's node in flags' terms:\n%s", err, out.String())
	}
}

// A data dir the process may not write (a Docker volume owned by root
// under the image's non-root user) is a configuration error that names
// the flag and the uid; a failure restarting may cure is not.
func TestStartErrorClassifies(t *testing.T) {
	c := config{ID: "r1", DataDir: "/data"}
	perm := &os.PathError{Op: "open", Path: "/data/raft.db", Err: os.ErrPermission}
	err, final := startError(c, fmt.Errorf("node: open storage: %w", perm))
	if !final || !strings.Contains(err.Error(), "-data-dir (RAFTLOCK_DATA_DIR) /data is not writable by this process (uid ") {
		t.Errorf("permission denied: final %v, %v", final, err)
	}
	if _, final := startError(c, node.ErrDecommissioned); !final {
		t.Error("a decommissioned data dir: not final")
	}
	if _, final := startError(c, fmt.Errorf("gossip: %w", syscall.EADDRINUSE)); final {
		t.Error("a busy port: final (restarting may cure it)")
	}
}

// A name that does not resolve is not a configuration error: DNS may
// answer on the next start (exit 1, which service managers retry).
func TestUnresolvedNameIsNotFinal(t *testing.T) {
	var out bytes.Buffer
	err := run(context.Background(), []string{"-id", "r1", "-data-dir", filepath.Join(t.TempDir(), "data"), "-http-no-auth",
		"-gossip-advertise", "no-such-host.invalid:7401"}, envOf(nil), &out)
	if err == nil || err == errUsage || !errors.Is(err, errLookup) || !strings.Contains(err.Error(), "-gossip-advertise (RAFTLOCK_GOSSIP_ADVERTISE)") {
		t.Errorf("run: %v (output %q), want a lookup error naming -gossip-advertise, not errUsage", err, out.String())
	}
}
