package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/raftlock/raftlock/admin"
)

// Names and free texts a lock-role client (or a client certificate's CN)
// can put in the cluster: ESC sequences that clear the line, recolour,
// retitle the window and write the clipboard (OSC 52); a C1 CSI; a
// right-to-left override.
const (
	clearLine = "job\x1b[2K\rok"
	colour    = "\x1b[31mred\x1b[0m"
	title     = "\x1b]0;pwned\x07"
	clipboard = "\x1b]52;c;cm0gLXJmIH4=\x07"
	c1        = "csi\u009b2J"
	rlo       = "admin\u202etxt.exe"
)

// terminalHazards returns what in out a terminal would act on.
func terminalHazards(out string) []string {
	var found []string
	for _, bad := range []string{"\x1b", "\x07", "\r", "\u009b", "\u202e"} {
		if strings.Contains(out, bad) {
			found = append(found, bad)
		}
	}
	return found
}

// The raftlock command shows names, descriptions, the revoker and error
// details with control characters escaped, in tables and in -o json
// (before: printed raw, so the ESC sequences acted on the operator's
// terminal).
func TestCommandEscapesTerminalControls(t *testing.T) {
	api := http.NewServeMux()
	api.HandleFunc("GET /v1/locks", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]any{"locks": []admin.LockJSON{
			{Name: clearLine, Held: true, Holder: &admin.HolderJSON{Session: 1, Description: colour, Token: 7},
				Waiters: []admin.WaiterJSON{{Position: 1, Session: 2, Description: title}}, WaiterCount: 1},
			{Name: clipboard, Limit: 2, Used: 1, Shared: []admin.HolderJSON{{Session: 3, Description: c1, Token: 8}}},
			{Name: rlo},
		}})
	})
	api.HandleFunc("GET /v1/sessions", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]any{"sessions": []admin.SessionJSON{{ID: 1, Description: clipboard}}, "total": 1})
	})
	api.HandleFunc("POST /v1/admin/revoke", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(admin.RevokeResponse{Lock: clearLine, Holder: admin.HolderJSON{Session: 1, Description: colour}, By: "cert:" + title})
	})
	api.HandleFunc("POST /v1/admin/transfer-leadership", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusConflict)
		json.NewEncoder(w).Encode(admin.ErrorJSON{Error: "refused", Detail: "member " + clearLine + " " + rlo})
	})
	srv := httptest.NewServer(api)
	defer srv.Close()
	for _, args := range [][]string{
		{"locks"}, {"-o", "json", "locks"}, {"sessions"}, {"-o", "json", "sessions"},
		{"revoke", "-why", "x", "job"}, {"leader", "transfer", "r2"},
	} {
		var stdout, stderr strings.Builder
		run(context.Background(), args, func(k string) string {
			if k == "RAFTLOCK_ADDR" {
				return srv.URL
			}
			return ""
		}, stdio{strings.NewReader(""), &stdout, &stderr})
		out := stdout.String() + stderr.String()
		if args[0] == "-o" && !json.Valid([]byte(stdout.String())) {
			t.Errorf("raftlock %s: not JSON:\n%s", strings.Join(args, " "), stdout.String())
		}
		if bad := terminalHazards(out); len(bad) > 0 {
			t.Errorf("raftlock %s printed %q raw:\n%s", strings.Join(args, " "), bad, out)
		}
		if !strings.Contains(out, `\x1b`) && !strings.Contains(out, `\u001b`) && !strings.Contains(out, `\u202e`) {
			t.Errorf("raftlock %s: no escaped control characters in its output:\n%s", strings.Join(args, " "), out)
		}
	}
}
