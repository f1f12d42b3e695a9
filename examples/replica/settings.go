package main

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/raftlock/raftlock/admin"
	"github.com/raftlock/raftlock/node"
)

// settings is everything the replica starts with, built from its config
// and checked whole (prepare) before anything touches the data dir or the
// network: a bad setting leaves no trace and exits 2.
type settings struct {
	node  node.Config
	auth  admin.Auth
	https *tls.Config // nil: plain HTTP
	hosts []string    // admin.Config.AllowedHosts
}

// prepare reads the files the flags name (certificates, token file),
// decodes and resolves what they say, and validates the node's and the
// admin API's configurations. Every error is a configuration error and
// names the flags and environment variables to change.
func (c config) prepare() (settings, error) {
	var s settings
	var err error
	if s.node, err = c.nodeConfig(); err != nil {
		return s, err
	}
	if s.auth, err = c.adminAuth(); err != nil {
		return s, err
	}
	if s.https, err = c.httpTLS(); err != nil {
		return s, err
	}
	s.hosts = c.allowedHosts()
	ac := admin.Config{Auth: s.auth, TTL: c.TTL, LockDelay: c.LockDelay, AllowedHosts: s.hosts}
	if err := ac.Validate(); err != nil {
		return s, fmt.Errorf("the HTTP API's settings (%s, %s, %s, %s): %w",
			flagRef("admin-token"), flagRef("admin-token-file"), flagRef("http-client-role"), flagRef("http-allowed-hosts"), inFlagTerms(err))
	}
	return s, nil
}

// fieldFlags maps the Go names of node.Config's and admin.Config's fields,
// as their Validate errors spell them, to the flags that set them.
var fieldFlags = map[string]string{
	"Gossip.AdvertiseAddr":    "gossip-advertise",
	"Gossip.AllowUnencrypted": "allow-unencrypted-gossip",
	"Gossip.Addr":             "gossip",
	"Gossip.Key":              "gossip-key",
	"Gossip.Join":             "join",
	"Join":                    "join",
	"AdvertiseAddr":           "advertise",
	"BindAddr":                "bind",
	"AllowPlaintext":          "allow-plaintext",
	"BootstrapExpect":         "bootstrap-expect",
	"MaxVoters":               "max-voters",
	"ReapTimeout":             "reap-timeout",
	"DataDir":                 "data-dir",
	"LogStore":                "log-store",
	"Recover":                 "recover",
	"ID":                      "id",
	"AllowedHosts":            "http-allowed-hosts",
	"LockDelay":               "lock-delay",
	"Auth.Unauthenticated":    "http-no-auth",
}

var (
	// fieldPattern matches the names of fieldFlags (longest first, whole
	// words; an index such as Join[2] goes with its name).
	fieldPattern = func() *regexp.Regexp {
		names := make([]string, 0, len(fieldFlags))
		for f := range fieldFlags {
			names = append(names, regexp.QuoteMeta(f))
		}
		slices.SortFunc(names, func(a, b string) int { return len(b) - len(a) })
		return regexp.MustCompile(`\b(` + strings.Join(names, "|") + `)\b(\[\d+\])?`)
	}()
	// invalidPrefix is the "pkg: invalid config: " that node, transport
	// and admin put before their reasons.
	invalidPrefix = regexp.MustCompile(`(\w+: )?invalid config: (auth: )?`)
)

// inFlagTerms rewrites a node or admin configuration error so that it
// names the replica's flags and environment variables instead of Go
// fields: "node: invalid config: Gossip.Key is 5 bytes" becomes
// "-gossip-key (RAFTLOCK_GOSSIP_KEY) is 5 bytes". nil stays nil.
func inFlagTerms(err error) error {
	if err == nil {
		return nil
	}
	msg := invalidPrefix.ReplaceAllString(err.Error(), "")
	msg = fieldPattern.ReplaceAllStringFunc(msg, func(m string) string {
		name, _, _ := strings.Cut(m, "[")
		return flagRef(fieldFlags[name])
	})
	return errors.New(msg)
}

// startError explains what node.Start refused in the replica's terms,
// and whether restarting cannot help (a configuration error: exit 2).
func startError(c config, err error) (error, bool) {
	switch {
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("%s %s is not writable by this process (uid %d): give it to that user (a Docker volume: chown %d, or start from the image's /data): %w",
			flagRef("data-dir"), c.DataDir, os.Getuid(), os.Getuid(), err), true
	case errors.Is(err, node.ErrInvalidConfig): // Validate passed: the data dir's state refused it
		return fmt.Errorf("%s %q, %s %s: %w", flagRef("id"), c.ID, flagRef("data-dir"), c.DataDir, inFlagTerms(err)), true
	case errors.Is(err, node.ErrDecommissioned):
		return fmt.Errorf("%s %s: %w (to rejoin, start with an empty data dir)", flagRef("data-dir"), c.DataDir, err), true
	case errors.Is(err, node.ErrDuplicateID):
		return fmt.Errorf("%s %q: %w", flagRef("id"), c.ID, err), true
	}
	return err, false
}
