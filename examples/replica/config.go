package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"github.com/raftlock/raftlock/admin"
	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/nodeopts"
	"github.com/raftlock/raftlock/lockapi"
	"github.com/raftlock/raftlock/node"
	"github.com/raftlock/raftlock/transport"
)

// config is what the flags and environment variables set.
type config struct {
	ID              string
	DataDir         string
	Bind            string
	Advertise       string
	Gossip          string
	GossipAdvertise string
	Join            string // comma-separated
	BootstrapExpect int
	HTTP            string
	TLSCA           string
	TLSCert         string
	TLSKey          string
	TLSServerName   string
	AllowPlaintext  bool
	GossipKey       string // base64
	TTL             time.Duration
	LockDelay       time.Duration
	Timing          string
	LogStore        string // bolt or wal (node.Config.LogStore)
	MaxVoters       int
	ReapTimeout     time.Duration
	LogLevel        string
	LeaveOnStop     bool
	Recover         bool
	UnencryptedOK   bool
	// The admin API's authentication (admin.Auth).
	AdminToken     string // one admin token, named "admin"
	AdminTokenFile string // lines "name role secret"
	HTTPNoAuth     bool
	HTTPTLSCert    string
	HTTPTLSKey     string
	HTTPClientCA   string // verified client certificates get -http-client-role
	HTTPClientRole string
	// Host names the API answers without authentication besides IP
	// addresses and localhost (admin.Config.AllowedHosts), comma-separated.
	HTTPAllowedHosts string
}

// envVars maps flags to the environment variables that set them. Flags win.
var envVars = map[string]string{
	"id":                       "RAFTLOCK_ID",
	"data-dir":                 "RAFTLOCK_DATA_DIR",
	"bind":                     "RAFTLOCK_BIND",
	"advertise":                "RAFTLOCK_ADVERTISE",
	"gossip":                   "RAFTLOCK_GOSSIP",
	"gossip-advertise":         "RAFTLOCK_GOSSIP_ADVERTISE",
	"join":                     "RAFTLOCK_JOIN",
	"bootstrap-expect":         "RAFTLOCK_BOOTSTRAP_EXPECT",
	"http":                     "RAFTLOCK_HTTP",
	"tls-ca":                   "RAFTLOCK_TLS_CA",
	"tls-cert":                 "RAFTLOCK_TLS_CERT",
	"tls-key":                  "RAFTLOCK_TLS_KEY",
	"tls-server-name":          "RAFTLOCK_TLS_SERVER_NAME",
	"allow-plaintext":          "RAFTLOCK_ALLOW_PLAINTEXT",
	"gossip-key":               "RAFTLOCK_GOSSIP_KEY",
	"ttl":                      "RAFTLOCK_TTL",
	"lock-delay":               "RAFTLOCK_LOCK_DELAY",
	"timing":                   "RAFTLOCK_TIMING",
	"log-store":                "RAFTLOCK_LOG_STORE",
	"max-voters":               "RAFTLOCK_MAX_VOTERS",
	"reap-timeout":             "RAFTLOCK_REAP_TIMEOUT",
	"log-level":                "RAFTLOCK_LOG_LEVEL",
	"leave-on-stop":            "RAFTLOCK_LEAVE_ON_STOP",
	"recover":                  "RAFTLOCK_RECOVER",
	"allow-unencrypted-gossip": "RAFTLOCK_ALLOW_UNENCRYPTED_GOSSIP",
	"admin-token":              "RAFTLOCK_ADMIN_TOKEN",
	"admin-token-file":         "RAFTLOCK_ADMIN_TOKEN_FILE",
	"http-no-auth":             "RAFTLOCK_HTTP_NO_AUTH",
	"http-tls-cert":            "RAFTLOCK_HTTP_TLS_CERT",
	"http-tls-key":             "RAFTLOCK_HTTP_TLS_KEY",
	"http-client-ca":           "RAFTLOCK_HTTP_CLIENT_CA",
	"http-client-role":         "RAFTLOCK_HTTP_CLIENT_ROLE",
	"http-allowed-hosts":       "RAFTLOCK_HTTP_ALLOWED_HOSTS",
}

// flagHelp: -h was given (the usage has been printed).
var flagHelp = flag.ErrHelp

// parseConfig reads the environment (through getenv), then the flags.
func parseConfig(args []string, getenv func(string) string, out io.Writer) (config, error) {
	var c config
	d := node.DefaultConfig()
	fs := flag.NewFlagSet("replica", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&c.ID, "id", "", "node id, unique in the cluster for the node's whole life (required)")
	fs.StringVar(&c.DataDir, "data-dir", "", "directory of the Raft log, stable store and snapshots (required)")
	fs.StringVar(&c.Bind, "bind", "127.0.0.1:7400", "Raft/RPC bind address (host:port)")
	fs.StringVar(&c.Advertise, "advertise", "", "Raft/RPC address peers dial (default: the bound address)")
	fs.StringVar(&c.Gossip, "gossip", "127.0.0.1:7401", "gossip bind address (ip:port, UDP and TCP)")
	fs.StringVar(&c.GossipAdvertise, "gossip-advertise", "", "gossip address other members reach (default: the bound address)")
	fs.StringVar(&c.Join, "join", "", "comma-separated gossip addresses of seed members")
	fs.IntVar(&c.BootstrapExpect, "bootstrap-expect", 3, "number of replicas that form a new cluster (0: only join an existing one)")
	fs.StringVar(&c.HTTP, "http", "127.0.0.1:8080", "HTTP API and status page address")
	fs.StringVar(&c.TLSCA, "tls-ca", "", "PEM file of the CA that signs every replica's certificate (enables mutual TLS)")
	fs.StringVar(&c.TLSCert, "tls-cert", "", "PEM file of this replica's certificate")
	fs.StringVar(&c.TLSKey, "tls-key", "", "PEM file of this replica's private key")
	fs.StringVar(&c.TLSServerName, "tls-server-name", "", "name every peer certificate carries as a DNS SAN (default: the dialed host)")
	fs.BoolVar(&c.AllowPlaintext, "allow-plaintext", false, "without mutual TLS, accept a -bind address other than loopback (anyone who reaches it can speak Raft to this replica; only on a trusted network)")
	fs.StringVar(&c.GossipKey, "gossip-key", "", "base64 key (16, 24 or 32 bytes) encrypting gossip")
	fs.DurationVar(&c.TTL, "ttl", lockapi.DefaultTTL, "TTL of the HTTP clients' session")
	fs.DurationVar(&c.LockDelay, "lock-delay", 0, "lock-delay of the HTTP clients' session")
	fs.StringVar(&c.Timing, "timing", "lan", "Raft and gossip timing: lan (500 ms, TTLs from 4.5s), fast (300 ms Raft timeouts: faster failover, more idle CPU, TTLs from 2.7s) or test")
	fs.StringVar(&c.LogStore, "log-store", string(node.LogStoreBolt), "Raft log store: bolt or wal (a data dir holds one kind; convert it with 'replica migrate-log-store')")
	fs.IntVar(&c.MaxVoters, "max-voters", d.MaxVoters, "voters the leader keeps; more members join as non-voters")
	fs.DurationVar(&c.ReapTimeout, "reap-timeout", d.ReapTimeout, "how long a failed member stays in the Raft configuration")
	fs.StringVar(&c.LogLevel, "log-level", "info", "debug, info, warn or error")
	fs.BoolVar(&c.LeaveOnStop, "leave-on-stop", false, "on SIGTERM/SIGINT, leave the cluster for good (decommission) instead of stopping for a restart")
	fs.BoolVar(&c.Recover, "recover", false, "disaster recovery: make this replica the only voter of its cluster (its data dir's state is kept); runs once per data dir")
	fs.BoolVar(&c.UnencryptedOK, "allow-unencrypted-gossip", false, "allow mutual TLS with gossip in clear text (a closed network)")
	fs.StringVar(&c.AdminToken, "admin-token", "", "bearer token of the admin API's \"admin\" (prefer the environment variable: flags show in ps)")
	fs.StringVar(&c.AdminTokenFile, "admin-token-file", "", "file of admin API tokens, one \"name role secret\" per line (role: read, lock or admin)")
	fs.BoolVar(&c.HTTPNoAuth, "http-no-auth", false, "serve the HTTP API without authentication (a closed network only)")
	fs.StringVar(&c.HTTPTLSCert, "http-tls-cert", "", "PEM certificate: serve HTTPS")
	fs.StringVar(&c.HTTPTLSKey, "http-tls-key", "", "PEM key of -http-tls-cert")
	fs.StringVar(&c.HTTPClientCA, "http-client-ca", "", "PEM CA: with -http-tls-cert, HTTPS clients with a certificate it signed are authenticated")
	fs.StringVar(&c.HTTPClientRole, "http-client-role", "admin", "role of a verified HTTPS client certificate: read, lock or admin")
	fs.StringVar(&c.HTTPAllowedHosts, "http-allowed-hosts", "", "with -http-no-auth: comma-separated host names (name or *.suffix) the API answers besides IP addresses and localhost")
	fs.Usage = func() {
		fmt.Fprintf(out, "usage: replica [flags]\n       replica certs -dir DIR -names r1,r2,r3   (trial certificates, valid for a day)\n       replica certs ca -dir DIR                (a CA: ca.pem, ca-key.pem)\n       replica certs issue -ca CA.pem -ca-key CA-key.pem -id ID -dir DIR   (a certificate naming ID)\n       replica migrate-log-store -data-dir DIR -from bolt -to wal\n\nEvery flag can also be set by its environment variable; flags win.\n\n")
		fs.VisitAll(func(f *flag.Flag) {
			fmt.Fprintf(out, "  -%s (%s)\n    \t%s", f.Name, envVars[f.Name], f.Usage)
			if f.DefValue != "" {
				fmt.Fprintf(out, " (default %s)", f.DefValue)
			}
			fmt.Fprintln(out)
		})
	}
	for name, env := range envVars {
		if v := getenv(env); v != "" {
			if err := fs.Set(name, v); err != nil {
				return c, fmt.Errorf("%s=%q: %w", env, v, err)
			}
		}
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return c, flagHelp
		}
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %q (every setting is a flag: replica -h lists them)", fs.Args())
	}
	return c, c.check()
}

// flagRef names a flag and its environment variable, as every
// configuration error does: "-allow-plaintext (RAFTLOCK_ALLOW_PLAINTEXT)".
func flagRef(name string) string { return "-" + name + " (" + envVars[name] + ")" }

// switchRef names a boolean flag and the variable that sets it:
// "-http-no-auth (RAFTLOCK_HTTP_NO_AUTH=true)".
func switchRef(name string) string { return "-" + name + " (" + envVars[name] + "=true)" }

// check reports the first problem with the flags' values that needs no
// file and no lookup (prepare checks the rest).
func (c config) check() error {
	switch {
	case c.ID == "":
		return fmt.Errorf("%s is required", flagRef("id"))
	case c.DataDir == "":
		return fmt.Errorf("%s is required", flagRef("data-dir"))
	case c.Bind == "":
		return fmt.Errorf("%s is required", flagRef("bind"))
	case !validHostPort(c.HTTP):
		return fmt.Errorf("%s %q: want host:port (such as 127.0.0.1:8080, or 0.0.0.0:8080 for every interface)", flagRef("http"), c.HTTP)
	case c.Gossip == "":
		return fmt.Errorf("%s is required: replicas find each other through gossip", flagRef("gossip"))
	case c.Timing != "lan" && c.Timing != "fast" && c.Timing != "test":
		return fmt.Errorf("%s %q: want lan, fast or test", flagRef("timing"), c.Timing)
	case !validLogStore(c.LogStore):
		return fmt.Errorf("%s %q: want %s or %s", flagRef("log-store"), c.LogStore, node.LogStoreBolt, node.LogStoreWAL)
	case (c.TLSCA != "" || c.TLSCert != "" || c.TLSKey != "") && (c.TLSCA == "" || c.TLSCert == "" || c.TLSKey == ""):
		return fmt.Errorf("mutual TLS needs all three of %s, %s and %s", flagRef("tls-ca"), flagRef("tls-cert"), flagRef("tls-key"))
	case c.TLSCA == "" && !c.AllowPlaintext && !loopbackAddr(c.Bind):
		return fmt.Errorf("%s %q is not a loopback address, and without mutual TLS anyone who reaches it can speak Raft to this replica: "+
			"set %s, %s and %s (replica certs writes trial ones), or %s if only the replicas can reach this network",
			flagRef("bind"), c.Bind, flagRef("tls-ca"), flagRef("tls-cert"), flagRef("tls-key"), switchRef("allow-plaintext"))
	case c.TLSCA != "" && c.GossipKey == "" && !c.UnencryptedOK:
		return fmt.Errorf("mutual TLS is on but gossip would be in clear text: set %s (base64 of 32 random bytes: openssl rand -base64 32), or %s on a closed network",
			flagRef("gossip-key"), switchRef("allow-unencrypted-gossip"))
	case c.BootstrapExpect < 0:
		return fmt.Errorf("%s %d: want 0 (join only) or the number of founding replicas", flagRef("bootstrap-expect"), c.BootstrapExpect)
	case c.MaxVoters < 0:
		return fmt.Errorf("%s %d: want 0 (the default, %d) or more", flagRef("max-voters"), c.MaxVoters, node.DefaultConfig().MaxVoters)
	case c.BootstrapExpect > c.maxVoters():
		return fmt.Errorf("%s %d: more founders than voters (%s %d)", flagRef("bootstrap-expect"), c.BootstrapExpect, flagRef("max-voters"), c.maxVoters())
	case c.ReapTimeout < 0:
		return fmt.Errorf("%s %v: want 0 (the default) or more", flagRef("reap-timeout"), c.ReapTimeout)
	case (c.HTTPTLSCert == "") != (c.HTTPTLSKey == ""):
		return fmt.Errorf("HTTPS needs both %s and %s", flagRef("http-tls-cert"), flagRef("http-tls-key"))
	case c.HTTPClientCA != "" && c.HTTPTLSCert == "":
		return fmt.Errorf("%s needs HTTPS (%s and %s)", flagRef("http-client-ca"), flagRef("http-tls-cert"), flagRef("http-tls-key"))
	case !c.HTTPNoAuth && c.AdminToken == "" && c.AdminTokenFile == "" && c.HTTPClientCA == "":
		return fmt.Errorf("the HTTP API needs authentication: %s, %s or %s; or %s on a closed network",
			flagRef("admin-token"), flagRef("admin-token-file"), flagRef("http-client-ca"), switchRef("http-no-auth"))
	case c.AdminToken != "" && len(c.AdminToken) < admin.MinSecretLen:
		return fmt.Errorf("%s is %d bytes long: want at least %d (make one with: openssl rand -hex 16)", flagRef("admin-token"), len(c.AdminToken), admin.MinSecretLen)
	case c.HTTPClientCA != "" && !validRole(c.HTTPClientRole):
		return fmt.Errorf("%s %q: want read, lock or admin", flagRef("http-client-role"), c.HTTPClientRole)
	case c.TTL > fsmwire.MaxTTL:
		return fmt.Errorf("%s %v: want at most %v", flagRef("ttl"), c.TTL, fsmwire.MaxTTL)
	case c.LockDelay < 0 || c.LockDelay > fsmwire.MaxLockDelay:
		return fmt.Errorf("%s %v: want 0 to %v", flagRef("lock-delay"), c.LockDelay, fsmwire.MaxLockDelay)
	}
	if min := lockapi.MinTTLFor(c.timing()); c.TTL < min {
		return fmt.Errorf("%s %v: below the minimum %v for %s %s (a keepalive interval must outlast a leader failover)", flagRef("ttl"), c.TTL, min, flagRef("timing"), c.Timing)
	}
	for _, h := range c.allowedHosts() {
		if (admin.Config{Auth: admin.Auth{Unauthenticated: true}, AllowedHosts: []string{h}}).Validate() != nil {
			return fmt.Errorf("%s entry %q: want a host name such as raftlock.internal or *.ops.example, without scheme or port", flagRef("http-allowed-hosts"), h)
		}
	}
	if _, err := logLevel(c.LogLevel); err != nil {
		return err
	}
	return nil
}

// maxVoters is -max-voters with its default applied.
func (c config) maxVoters() int {
	if c.MaxVoters == 0 {
		return node.DefaultConfig().MaxVoters
	}
	return c.MaxVoters
}

// loopbackAddr reports whether a host:port's host is localhost or a
// loopback IP: the only plaintext -bind the transport accepts without
// -allow-plaintext.
func loopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return true // malformed: node.Config.Validate explains it
	}
	ip := net.ParseIP(host)
	return host == "localhost" || ip != nil && ip.IsLoopback()
}

func validHostPort(addr string) bool {
	_, _, err := net.SplitHostPort(addr)
	return err == nil
}

func validRole(r string) bool {
	switch admin.Role(r) {
	case admin.RoleRead, admin.RoleLock, admin.RoleAdmin:
		return true
	}
	return false
}

// allowedHosts splits -http-allowed-hosts.
func (c config) allowedHosts() []string {
	var out []string
	for _, h := range strings.Split(c.HTTPAllowedHosts, ",") {
		if h = strings.TrimSpace(h); h != "" {
			out = append(out, h)
		}
	}
	return out
}

func logLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("%s %q: want debug, info, warn or error", flagRef("log-level"), s)
	}
	return l, nil
}

// timing is the Raft timing -timing selects.
func (c config) timing() node.Timing {
	switch c.Timing {
	case "test":
		return nodeopts.TestTiming()
	case "fast":
		return node.FastFailoverTiming()
	}
	return node.DefaultConfig().Timing
}

// errLookup: a name could not be resolved. Not a configuration error
// (exit 1, not 2): DNS may answer on the next start.
var errLookup = errors.New("resolving")

// resolveHost turns a host name in host:port into an IP address (IPv4
// preferred): gossip binds and advertises IP literals. (Join seeds may stay
// names: gossip resolves them again at every join attempt.)
func resolveHost(addr string) (string, error) {
	if addr == "" {
		return "", nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host == "" || net.ParseIP(host) != nil {
		return addr, nil // Validate explains a malformed one
	}
	ips, err := net.LookupIP(host)
	if err != nil || len(ips) == 0 {
		return "", fmt.Errorf("%w %q: %v", errLookup, host, err)
	}
	ip := ips[0]
	for _, c := range ips {
		if c.To4() != nil {
			ip = c
			break
		}
	}
	return net.JoinHostPort(ip.String(), port), nil
}

// nodeConfig turns the configuration into a node.Config (reading the TLS
// files and decoding the gossip key).
func (c config) nodeConfig() (node.Config, error) {
	nc := node.DefaultConfig()
	nc.ID, nc.DataDir = c.ID, c.DataDir
	nc.BindAddr, nc.AdvertiseAddr = c.Bind, c.Advertise
	nc.AllowPlaintext = c.AllowPlaintext
	nc.Gossip.Addr, nc.Gossip.AdvertiseAddr = c.Gossip, c.GossipAdvertise
	for _, s := range strings.Split(c.Join, ",") {
		if s = strings.TrimSpace(s); s != "" {
			nc.Gossip.Join = append(nc.Gossip.Join, s)
		}
	}
	nc.BootstrapExpect = c.BootstrapExpect
	nc.LogStore = node.LogStore(c.LogStore)
	nc.MaxVoters, nc.ReapTimeout = c.MaxVoters, c.ReapTimeout
	nc.Recover, nc.Gossip.AllowUnencrypted = c.Recover, c.UnencryptedOK
	nc.Timing = c.timing()
	if c.Timing == "test" {
		nc.Gossip.Timing = nodeopts.TestGossipTiming()
	}
	var err error
	if nc.Gossip.Addr, err = resolveHost(nc.Gossip.Addr); err != nil {
		return nc, fmt.Errorf("%s: %w", flagRef("gossip"), err)
	}
	if nc.Gossip.AdvertiseAddr, err = resolveHost(nc.Gossip.AdvertiseAddr); err != nil {
		return nc, fmt.Errorf("%s: %w", flagRef("gossip-advertise"), err)
	}
	if c.GossipKey != "" {
		key, err := base64.StdEncoding.DecodeString(c.GossipKey)
		if err != nil {
			return nc, fmt.Errorf("%s: not base64: %w", flagRef("gossip-key"), err)
		}
		nc.Gossip.Key = key
	}
	if c.TLSCA != "" {
		t, err := loadTLS(c.TLSCA, c.TLSCert, c.TLSKey, c.TLSServerName)
		if err != nil {
			return nc, err
		}
		nc.TLS = t
	}
	return nc, inFlagTerms(nc.Validate())
}

func loadTLS(caFile, certFile, keyFile, serverName string) (*tls.Config, error) {
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flagRef("tls-ca"), err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("%s %s: no PEM certificate found", flagRef("tls-ca"), caFile)
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("%s, %s: %w", flagRef("tls-cert"), flagRef("tls-key"), err)
	}
	return transport.NewMutualTLSConfig(cert, pool, serverName), nil
}
