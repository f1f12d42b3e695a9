package admin

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/replica"
	"github.com/raftlock/raftlock/internal/testing/clustertest"
	"github.com/raftlock/raftlock/internal/testing/memnet"
	"github.com/raftlock/raftlock/node"
)

// Once this node's clients used up its share of the sessions, an acquire
// that needs a session of its own answers 429 fair_share with the figures,
// and the server's own shared session still opens (the node's reserve), so
// acquisitions in it still work.
func TestFairShareAnswers429AndTheSharedSessionStillOpens(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim := fsm.DefaultLimits()
		lim.MaxSessions, lim.NodeShares = 8, 2 // a node alone: 6
		c := clustertest.Start(t, clustertest.Options{Nodes: 1, Net: memnet.New(), Configure: func(i int, cfg *node.Config) { cfg.Limits = lim }})
		c.WaitLeader(10 * time.Second)
		c.WaitReady(10 * time.Second)
		n := c.Nodes[0]
		c.WaitLimits(lim, 10*time.Second)
		for range 6 { // the application's sessions take what this node may
			if r, err := replica.Of(n).Apply(context.Background(), fsm.OpenSession{TTL: time.Hour}); err != nil || r.Status != fsmwire.StatusOK {
				t.Fatalf("%v %+v", err, r)
			}
		}
		api := newAPI(t, n, testLimits{})
		defer closeAPI(t, api)

		a := serve(api, "192.0.2.1:1", "POST", "/v1/acquire", `{"lock":"own","owner":"job-7"}`)
		if a.code != http.StatusTooManyRequests || a.body.Error != ErrKindFairShare || !strings.Contains(a.body.Detail, `node_sessions: node "n1" holds 6 sessions`) {
			t.Fatalf("an acquire in a session of its own: %d %s", a.code, a.raw)
		}
		t.Logf("%d %s", a.code, a.raw)
		a = serve(api, "192.0.2.1:1", "POST", "/v1/acquire", `{"lock":"shared","session":"replica"}`)
		if a.code != http.StatusOK {
			t.Fatalf("an acquire in the server's shared session: %d %s", a.code, a.raw)
		}
		if a := serve(api, "192.0.2.1:1", "GET", "/v1/locks/shared", ""); a.code != http.StatusOK {
			t.Fatalf("%d %s", a.code, a.raw)
		}
	})
}
