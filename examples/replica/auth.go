package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	stdlog "log"
	"log/slog"
	"os"
	"strings"

	"github.com/raftlock/raftlock/admin"
)

// adminAuth builds the admin API's authentication from the flags.
func (c config) adminAuth() (admin.Auth, error) {
	a := admin.Auth{Unauthenticated: c.HTTPNoAuth}
	if c.AdminToken != "" {
		a.Tokens = append(a.Tokens, admin.Token{Name: "admin", Secret: c.AdminToken, Role: admin.RoleAdmin})
	}
	if c.AdminTokenFile != "" {
		toks, err := readTokenFile(c.AdminTokenFile)
		if err != nil {
			return a, err
		}
		a.Tokens = append(a.Tokens, toks...)
	}
	if c.HTTPClientCA != "" {
		a.ClientCertRole = admin.Role(c.HTTPClientRole)
	}
	return a, nil
}

// readTokenFile reads "name role secret" lines (blank lines and # comments
// skipped).
func readTokenFile(path string) ([]admin.Token, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flagRef("admin-token-file"), err)
	}
	defer f.Close()
	var out []admin.Token
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		fields := strings.Fields(text)
		bad := func(format string, args ...any) ([]admin.Token, error) {
			return nil, fmt.Errorf("%s %s:%d: "+format, append([]any{flagRef("admin-token-file"), path, line}, args...)...)
		}
		switch {
		case len(fields) != 3:
			return bad("want \"name role secret\"")
		case !validRole(fields[1]):
			return bad("role %q: want read, lock or admin", fields[1])
		case len(fields[2]) < admin.MinSecretLen:
			return bad("the secret of %q is %d bytes long: want at least %d (make one with: openssl rand -hex 16)", fields[0], len(fields[2]), admin.MinSecretLen)
		}
		out = append(out, admin.Token{Name: fields[0], Role: admin.Role(fields[1]), Secret: fields[2]})
	}
	return out, sc.Err()
}

// httpTLS returns the HTTPS configuration (nil: plain HTTP).
func (c config) httpTLS() (*tls.Config, error) {
	if c.HTTPTLSCert == "" {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(c.HTTPTLSCert, c.HTTPTLSKey)
	if err != nil {
		return nil, fmt.Errorf("%s, %s: %w", flagRef("http-tls-cert"), flagRef("http-tls-key"), err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if c.HTTPClientCA != "" {
		pem, err := os.ReadFile(c.HTTPClientCA)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", flagRef("http-client-ca"), err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s %s: no PEM certificate", flagRef("http-client-ca"), c.HTTPClientCA)
		}
		// Certificates are optional (token clients), verified when given.
		cfg.ClientCAs, cfg.ClientAuth = pool, tls.VerifyClientCertIfGiven
	}
	return cfg, nil
}

// httpErrorLog is the HTTP server's error log: what clients cause (a
// failed TLS handshake, a connection they dropped) at debug level, the
// rest as warnings.
func httpErrorLog(log *slog.Logger) *stdlog.Logger {
	return stdlog.New(httpLogWriter{log}, "", 0)
}

type httpLogWriter struct{ log *slog.Logger }

func (w httpLogWriter) Write(b []byte) (int, error) {
	msg := strings.TrimSpace(string(b))
	level := slog.LevelWarn
	for _, s := range []string{"TLS handshake error", "broken pipe", "connection reset by peer", "i/o timeout"} {
		if strings.Contains(msg, s) {
			level = slog.LevelDebug
		}
	}
	w.log.Log(context.Background(), level, "http server", "err", msg)
	return len(b), nil
}
