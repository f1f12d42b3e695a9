package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/raftlock/raftlock/internal/nodeopts"
	"github.com/raftlock/raftlock/lockapi"
	"github.com/raftlock/raftlock/node"
)

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestConfigEnvAndFlags(t *testing.T) {
	key := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32))
	env := map[string]string{
		"RAFTLOCK_ID": "env-id", "RAFTLOCK_DATA_DIR": "/tmp/x", "RAFTLOCK_BIND": "127.0.0.1:9000",
		"RAFTLOCK_GOSSIP": "127.0.0.1:9001", "RAFTLOCK_JOIN": "127.0.0.1:9101, 127.0.0.1:9201",
		"RAFTLOCK_BOOTSTRAP_EXPECT": "5", "RAFTLOCK_HTTP": "127.0.0.1:9002", "RAFTLOCK_TTL": "7s",
		"RAFTLOCK_GOSSIP_KEY": key, "RAFTLOCK_ADVERTISE": "10.0.0.1:9000", "RAFTLOCK_GOSSIP_ADVERTISE": "10.0.0.1:9001",
		"RAFTLOCK_HTTP_NO_AUTH": "true",
	}
	var out bytes.Buffer
	c, err := parseConfig([]string{"-id", "flag-id", "-ttl", "4s", "-timing", "test"}, envOf(env), &out)
	if err != nil {
		t.Fatal(err)
	}
	if c.ID != "flag-id" || c.TTL != 4*time.Second {
		t.Errorf("flags must win over the environment: id %q ttl %v", c.ID, c.TTL)
	}
	if c.DataDir != "/tmp/x" || c.BootstrapExpect != 5 || c.HTTP != "127.0.0.1:9002" {
		t.Errorf("environment not applied: %+v", c)
	}
	nc, err := c.nodeConfig()
	if err != nil {
		t.Fatal(err)
	}
	if len(nc.Gossip.Join) != 2 || nc.Gossip.Join[1] != "127.0.0.1:9201" || len(nc.Gossip.Key) != 32 || nc.BootstrapExpect != 5 ||
		nc.AdvertiseAddr != "10.0.0.1:9000" || nc.Gossip.AdvertiseAddr != "10.0.0.1:9001" || nc.Timing != nodeopts.TestTiming() {
		t.Errorf("node config: %+v", nc)
	}
	if nc.AllowPlaintext {
		t.Error("AllowPlaintext set without -allow-plaintext")
	}
	env["RAFTLOCK_ALLOW_PLAINTEXT"] = "true"
	if c, err = parseConfig(nil, envOf(env), &out); err != nil {
		t.Fatal(err)
	}
	if nc, err = c.nodeConfig(); err != nil || !nc.AllowPlaintext {
		t.Errorf("RAFTLOCK_ALLOW_PLAINTEXT=true: AllowPlaintext %v, %v", nc.AllowPlaintext, err)
	}
}

func TestConfigErrors(t *testing.T) {
	base := map[string]string{"RAFTLOCK_ID": "a", "RAFTLOCK_DATA_DIR": "/tmp/a", "RAFTLOCK_HTTP_NO_AUTH": "true"}
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"no id", nil, map[string]string{"RAFTLOCK_DATA_DIR": "/d"}, "-id"},
		{"no data dir", []string{"-id", "a"}, nil, "-data-dir"},
		{"bad env duration", nil, map[string]string{"RAFTLOCK_ID": "a", "RAFTLOCK_DATA_DIR": "/d", "RAFTLOCK_TTL": "soon"}, "RAFTLOCK_TTL"},
		{"bad timing", []string{"-timing", "wan"}, base, "-timing"},
		{"TTL below lan timing's minimum", []string{"-ttl", "3s"}, base, "below the minimum 4.5s for -timing (RAFTLOCK_TIMING) lan"},
		{"partial TLS", []string{"-tls-ca", "ca.pem"}, base, "mutual TLS"},
		{"bad log level", []string{"-log-level", "loud"}, base, "-log-level"},
		{"extra args", []string{"oops"}, base, "unexpected"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			_, err := parseConfig(tc.args, envOf(tc.env), &out)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err %v, want one mentioning %q", err, tc.want)
			}
		})
	}
	c, err := parseConfig([]string{"-gossip-key", "!!!"}, envOf(base), &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.nodeConfig(); err == nil || !strings.Contains(err.Error(), "base64") {
		t.Errorf("bad gossip key: %v", err)
	}
	c, _ = parseConfig([]string{"-gossip-key", base64.StdEncoding.EncodeToString([]byte("short"))}, envOf(base), &bytes.Buffer{})
	if _, err := c.nodeConfig(); err == nil {
		t.Error("a 5-byte gossip key was accepted")
	}
}

// TestCertsAndTLSConfig: the certs subcommand writes files the replica
// loads as its mutual-TLS configuration.
func TestCertsAndTLSConfig(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	if err := run(context.Background(), []string{"certs", "-dir", dir, "-names", "r1,r2"}, envOf(nil), &out); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"ca.pem", "r1.pem", "r1-key.pem", "r2.pem", "r2-key.pem"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
	tlsArgs := []string{"-id", "r1", "-data-dir", dir, "-tls-ca", filepath.Join(dir, "ca.pem"),
		"-tls-cert", filepath.Join(dir, "r1.pem"), "-tls-key", filepath.Join(dir, "r1-key.pem"), "-tls-server-name", "raftlock", "-http-no-auth"}
	// Mutual TLS with gossip in clear text is refused unless allowed.
	if _, err := parseConfig(tlsArgs, envOf(nil), &out); err == nil || !strings.Contains(err.Error(), "gossip would be in clear text") {
		t.Fatalf("TLS without a gossip key: %v", err)
	}
	c, err := parseConfig(append(tlsArgs, "-gossip-key", base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{1}, 16))), envOf(nil), &out)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := c.nodeConfig()
	if err != nil {
		t.Fatal(err)
	}
	if nc.TLS == nil || nc.TLS.ServerName != "raftlock" || len(nc.TLS.Certificates) != 1 || nc.TLS.ClientCAs == nil {
		t.Errorf("TLS config: %+v", nc.TLS)
	}
	c.TLSKey = filepath.Join(dir, "r2-key.pem") // does not match r1.pem
	if _, err := c.nodeConfig(); err == nil {
		t.Error("a mismatched key was accepted")
	}
}

func TestUsage(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), []string{"-h"}, envOf(nil), &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"-bootstrap-expect (RAFTLOCK_BOOTSTRAP_EXPECT)", "-gossip-key (RAFTLOCK_GOSSIP_KEY)", "flags win"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("usage lacks %q:\n%s", want, out.String())
		}
	}
	if err := run(context.Background(), []string{"-bogus"}, envOf(nil), &out); err != errUsage {
		t.Errorf("unknown flag: %v, want errUsage", err)
	}
}

// TestConfigTimingChoices: each -timing value gives its node timing, and a
// TTL the default timing refuses is accepted with -timing fast.
func TestConfigTimingChoices(t *testing.T) {
	base := map[string]string{"RAFTLOCK_ID": "a", "RAFTLOCK_DATA_DIR": "/tmp/a", "RAFTLOCK_HTTP_NO_AUTH": "true"}
	for flag, want := range map[string]node.Timing{"lan": node.LANTiming(), "fast": node.FastFailoverTiming(), "test": nodeopts.TestTiming()} {
		var out bytes.Buffer
		c, err := parseConfig([]string{"-timing", flag, "-ttl", "3s"}, envOf(base), &out)
		if flag == "lan" {
			if err == nil {
				t.Errorf("-timing lan -ttl 3s accepted; want refused (minimum %v)", lockapi.MinTTLFor(want))
			}
			c, err = parseConfig([]string{"-timing", flag}, envOf(base), &out)
		}
		if err != nil {
			t.Fatalf("-timing %s: %v", flag, err)
		}
		nc, err := c.nodeConfig()
		if err != nil {
			t.Fatalf("-timing %s: %v", flag, err)
		}
		if nc.Timing != want {
			t.Errorf("-timing %s: node timing %+v, want %+v", flag, nc.Timing, want)
		}
	}
}
