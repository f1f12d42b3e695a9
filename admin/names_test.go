package admin

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/lockinfo"
	"github.com/raftlock/raftlock/internal/replica"
	"github.com/raftlock/raftlock/internal/testing/clustertest"
	"github.com/raftlock/raftlock/internal/testing/memnet"
	"github.com/raftlock/raftlock/internal/testing/replicaproc"
	"github.com/raftlock/raftlock/node"
)

// Lock names with control characters: the API refuses new ones (400), and
// one already in the table (written by an older release, or straight
// through node.Apply) is listed and revoked like any other. Token names
// may not contain them. The node's and the API's logs (slog's text format)
// show names, descriptions, the revoker and the reason escaped.
func TestControlCharactersInNames(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs replicaproc.Buffer // safe for the node's goroutines
		log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		c := clustertest.Start(t, clustertest.Options{Nodes: 1, Net: memnet.New(),
			Configure: func(_ int, cfg *node.Config) { cfg.Logger = log }})
		c.WaitReady(10 * time.Second)
		n := c.Nodes[0]
		if _, err := New(Config{Node: n, Auth: Auth{Tokens: []Token{{Name: "ops\x1b]0;x\x07", Secret: adminSecret, Role: RoleAdmin}}}}); !errors.Is(err, errInvalidConfig) {
			t.Errorf("a token name with ESC: New accepted it (%v)", err)
		}
		api := newAPI(t, n, testLimits{})
		defer closeAPI(t, api)
		if a := serve(api, "127.0.0.1:1", "POST", "/v1/acquire", `{"lock":"job\u001b[2K\rok","wait":false}`); a.code != http.StatusBadRequest {
			t.Errorf("acquire of a name with ESC: HTTP %d %s, want 400", a.code, a.raw)
		}
		if a := serve(api, "127.0.0.1:1", "POST", "/v1/acquire", `{"lock":"c1\u009b2J","wait":false,"ttl_ms":5000}`); a.code != http.StatusBadRequest {
			t.Errorf("acquire of a name with a C1 control: HTTP %d %s, want 400", a.code, a.raw)
		}
		if st := n.Stats(); st.Locks != 0 {
			t.Errorf("a refused name reached the state machine: %+v", st)
		}

		// A session and a grant as an older release wrote them, straight
		// through node.Apply (a lockapi session would release a grant it
		// does not know).
		ctx := context.Background()
		opened, err := replica.Of(n).Apply(ctx, fsm.OpenSession{TTL: time.Minute, Description: "\x1b[31mbilling\x1b[0m"})
		if err != nil || opened.Session == 0 {
			t.Fatalf("open a session through node.Apply: %+v %v", opened, err)
		}
		const legacy = "\x1b]52;c;cm0gLXJmIH4=\x07job"
		res, err := replica.Of(n).Apply(ctx, fsm.Acquire{Session: opened.Session, Lock: legacy, Owner: lockinfo.OwnerID{1}})
		if err != nil || res.Status != fsmwire.StatusGranted {
			t.Fatalf("a legacy name straight through node.Apply: %+v %v", res, err)
		}
		if a := serve(api, "127.0.0.1:1", "GET", "/v1/locks", ""); a.code != http.StatusOK || !strings.Contains(string(a.raw), `\u001b]52;c;`) {
			t.Errorf("listing: HTTP %d %s", a.code, a.raw)
		}
		if a := serve(api, "127.0.0.1:1", "POST", "/v1/admin/revoke", `{"lock":"\u001b]52;c;cm0gLXJmIH4=\u0007job","why":"\u001b[2Kstuck"}`); a.code != http.StatusOK {
			t.Errorf("revoke of the legacy name: HTTP %d %s", a.code, a.raw)
		}
		synctest.Wait()
		out := logs.String()
		if !strings.Contains(out, "lock revoked by an operator") {
			t.Fatalf("no revoke in the log:\n%s", out)
		}
		if strings.ContainsAny(out, "\x1b\x07\r") || strings.Contains(out, "\u009b") {
			t.Errorf("the log holds raw control characters:\n%q", out)
		}
		for _, want := range []string{`\x1b]52;c;cm0gLXJmIH4=\ajob`, `\x1b[31mbilling\x1b[0m`, `\x1b[2Kstuck`} {
			if !strings.Contains(out, want) {
				t.Errorf("the log lacks %s escaped", want)
			}
		}
	})
}
