package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/raftlock/raftlock/admin"
)

// client talks to one replica's admin API (package admin).
type client struct {
	base    string // scheme://host:port[/prefix], no trailing slash
	token   string // bearer token ("" none)
	hc      *http.Client
	timeout time.Duration // per request, unless the call says otherwise
}

// apiError is an error answer of the API.
type apiError struct {
	Code int
	Body admin.ErrorJSON
	Raw  []byte // the answer's body
}

func (e *apiError) Error() string {
	if e.Body.Detail != "" {
		return fmt.Sprintf("HTTP %d %s: %s", e.Code, e.Body.Error, e.Body.Detail)
	}
	return fmt.Sprintf("HTTP %d %s", e.Code, e.Body.Error)
}

// kindOf returns the error kind of an API error ("" for other errors).
func kindOf(err error) string {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae.Body.Error
	}
	return ""
}

// newClient builds a client from the global options.
func newClient(g globals) (*client, error) {
	base := strings.TrimRight(g.addr, "/")
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%w: -addr %q: want http(s)://host:port", errUsage, g.addr)
	}
	tr := &http.Transport{Proxy: http.ProxyFromEnvironment, MaxIdleConnsPerHost: 4, IdleConnTimeout: 30 * time.Second}
	if g.ca != "" || g.cert != "" {
		tc := &tls.Config{MinVersion: tls.VersionTLS12}
		if g.ca != "" {
			pem, err := os.ReadFile(g.ca)
			if err != nil {
				return nil, fmt.Errorf("-ca: %w", err)
			}
			tc.RootCAs = x509.NewCertPool()
			if !tc.RootCAs.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("-ca %s: no PEM certificate", g.ca)
			}
		}
		if g.cert != "" {
			c, err := tls.LoadX509KeyPair(g.cert, g.key)
			if err != nil {
				return nil, fmt.Errorf("-cert/-key: %w", err)
			}
			tc.Certificates = []tls.Certificate{c}
		}
		tr.TLSClientConfig = tc
	}
	return &client{base: base, token: g.token, hc: &http.Client{Transport: tr}, timeout: g.timeout}, nil
}

func (c *client) close() { c.hc.CloseIdleConnections() }

// call sends a request (body: JSON-encoded unless it is an io.Reader) and
// decodes a 2xx answer into out (an *[]byte gets the raw body). Error
// answers are *apiError. timeout 0: the client's.
func (c *client) call(ctx context.Context, method, path string, body, out any, timeout time.Duration) error {
	if timeout == 0 {
		timeout = c.timeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var rd io.Reader
	ctype := ""
	switch b := body.(type) {
	case nil:
	case io.Reader:
		rd, ctype = b, "application/octet-stream"
	default:
		enc, err := json.Marshal(b)
		if err != nil {
			return err
		}
		rd, ctype = bytes.NewReader(enc), "application/json"
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return err
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		if ctx.Err() != nil && errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("%s %s: no answer within %v", method, path, timeout)
		}
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<30))
	if err != nil {
		return fmt.Errorf("%s %s: reading the answer: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		ae := &apiError{Code: resp.StatusCode, Raw: data}
		if json.Unmarshal(data, &ae.Body) != nil || ae.Body.Error == "" {
			ae.Body = admin.ErrorJSON{Error: http.StatusText(resp.StatusCode), Detail: strings.TrimSpace(string(data[:min(len(data), 200)]))}
		}
		return ae
	}
	switch o := out.(type) {
	case nil:
		return nil
	case *[]byte:
		*o = data
		return nil
	default:
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("%s %s: decoding the answer: %w", method, path, err)
		}
		return nil
	}
}
