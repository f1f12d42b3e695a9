//go:build unix

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/raftlock/raftlock/admin"
)

// client talks to one replica's HTTP API (package admin plus /demo/*).
type client struct {
	id   string
	base string
	hc   *http.Client
}

// apiError is a non-200 answer.
type apiError struct {
	Code int
	Body admin.ErrorJSON
	Raw  string
}

func (e *apiError) Error() string {
	if e.Body.Error != "" {
		return fmt.Sprintf("HTTP %d %s: %s", e.Code, e.Body.Error, e.Body.Detail)
	}
	return fmt.Sprintf("HTTP %d: %s", e.Code, e.Raw)
}

// call sends a request (body as JSON if not nil) and decodes a 200 answer
// into out; any other answer is an *apiError.
func (c *client) call(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s on %s: %w", method, path, c.id, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		e := &apiError{Code: resp.StatusCode, Raw: string(b)}
		json.Unmarshal(b, &e.Body)
		return e
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("%s %s on %s: %w", method, path, c.id, err)
		}
	}
	return nil
}

func (c *client) status(ctx context.Context) (admin.StatusJSON, error) {
	var st admin.StatusJSON
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	err := c.call(ctx, "GET", "/v1/status", nil, &st)
	var ae *apiError
	if errors.As(err, &ae) && ae.Code == http.StatusServiceUnavailable && json.Unmarshal([]byte(ae.Raw), &st) == nil {
		return st, nil // not ready: the body is the status all the same
	}
	return st, err
}

// acquire takes lock in the replica's shared session ("session":"replica"),
// which the replica keeps alive: the story follows that session's
// keepalives, and its loss without a quorum, rather than renewals of ours.
func (c *client) acquire(ctx context.Context, lock string, wait bool, timeout time.Duration) (admin.AcquireResponse, error) {
	var out admin.AcquireResponse
	err := c.call(ctx, "POST", "/v1/acquire", admin.AcquireRequest{Lock: lock, Wait: wait, TimeoutMS: timeout.Milliseconds(), Session: "replica"}, &out)
	return out, err
}

func (c *client) release(ctx context.Context, handle string) error {
	return c.call(ctx, "POST", "/v1/release", admin.ReleaseRequest{Handle: handle}, nil)
}

func (c *client) lock(ctx context.Context, name string) (admin.LockJSON, error) {
	var out admin.LockJSON
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	err := c.call(ctx, "GET", "/v1/locks/"+name, nil, &out)
	return out, err
}

func (c *client) stats(ctx context.Context) (statsJSON, error) {
	var out statsJSON
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	err := c.call(ctx, "GET", "/demo/stats", nil, &out)
	return out, err
}

func (c *client) workers(ctx context.Context, run bool) error {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	return c.call(ctx, "POST", "/demo/workers", map[string]bool{"run": run}, nil)
}

func (c *client) singleton(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return c.call(ctx, "POST", "/demo/singleton", struct{}{}, nil)
}
