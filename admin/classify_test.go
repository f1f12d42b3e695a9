package admin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/raftlock/raftlock/lockapi"
	"github.com/raftlock/raftlock/node"
)

func TestClassify(t *testing.T) {
	locked := &lockapi.LockedError{Lock: "x", Holder: lockapi.Holder{Session: 3, Token: 9, Description: "http@r1"}}
	for _, tc := range []struct {
		err  error
		code int
		kind string
	}{
		{fmt.Errorf("wrapped: %w", locked), http.StatusConflict, ErrKindLocked},
		{fmt.Errorf("lockapi: lock %q: %w: %w", "x", lockapi.ErrNoQuorum, context.DeadlineExceeded), http.StatusServiceUnavailable, ErrKindNoQuorum},
		{fmt.Errorf("lockapi: lock %q: %w", "x", context.DeadlineExceeded), http.StatusGatewayTimeout, ErrKindTimeout},
		{fmt.Errorf("%w: bad", lockapi.ErrInvalidArgument), http.StatusBadRequest, ErrKindBadRequest},
		{fmt.Errorf("%w: lost", lockapi.ErrNotHolder), http.StatusConflict, ErrKindNotHolder},
		{fmt.Errorf("x: %w", lockapi.ErrSessionExpired), http.StatusServiceUnavailable, ErrKindSessionExpired},
		{node.ErrClosed, http.StatusServiceUnavailable, ErrKindClosed},
		{errClosed, http.StatusServiceUnavailable, ErrKindClosed},
		{context.Canceled, http.StatusServiceUnavailable, ErrKindCanceled},
		{errors.New("boom"), http.StatusInternalServerError, ErrKindInternal},
	} {
		code, body := classify(tc.err)
		if code != tc.code || body.Error != tc.kind || body.Detail != public(tc.err.Error()) || strings.Contains(body.Detail, "lockapi: ") || strings.Contains(body.Detail, "node: ") {
			t.Errorf("%v: %d %+v, want %d %s", tc.err, code, body, tc.code, tc.kind)
		}
	}
	_, body := classify(locked)
	if body.Holder == nil || body.Holder.Token != 9 || body.Holder.Description != "http@r1" || body.Holder.Session != 3 {
		t.Errorf("locked holder: %+v", body.Holder)
	}
}
