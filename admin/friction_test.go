package admin

import (
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raftlock/raftlock/internal/testing/clustertest"
	"github.com/raftlock/raftlock/internal/testing/memnet"
	"github.com/raftlock/raftlock/node"
)

// Every answer is JSON: unknown paths (404) and methods (405) included;
// details never show the library's package prefixes.
func TestJSONErrorsEverywhere(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, api := startAPI(t)
		for _, tc := range []struct {
			method, path, body string
			code               int
			kind               string
		}{
			{"GET", "/nope", "", http.StatusNotFound, ErrKindNotFound},
			{"GET", "/v1/nope", "", http.StatusNotFound, ErrKindNotFound},
			{"POST", "/v1/status", "", http.StatusMethodNotAllowed, ErrKindMethod},
			{"DELETE", "/v1/acquire", "", http.StatusMethodNotAllowed, ErrKindMethod},
			{"POST", "/v1/release", `{}`, http.StatusBadRequest, ErrKindBadRequest},
			{"POST", "/v1/release", `{"handle":""}`, http.StatusBadRequest, ErrKindBadRequest},
			{"GET", "/v1/lease", "", http.StatusBadRequest, ErrKindBadRequest},
			{"POST", "/v1/acquire", `{"lock":""}`, http.StatusBadRequest, ErrKindBadRequest},
			{"POST", "/v1/acquire", `{"lock":"x","ttl_ms":1}`, http.StatusBadRequest, ErrKindBadRequest},
			{"POST", "/v1/admin/revoke", `{"lock":"x","token":99}`, http.StatusConflict, ErrKindNotHeld},
			{"POST", "/v1/admin/end-session", `{"session":12345}`, http.StatusNotFound, ErrKindNotFound},
			{"POST", "/v1/admin/snapshot", `garbage`, http.StatusBadRequest, ErrKindBadSnapshot},
		} {
			a := serve(api, "192.0.2.1:1", tc.method, tc.path, tc.body)
			if a.code != tc.code || a.body.Error != tc.kind {
				t.Errorf("%s %s %s: HTTP %d %s, want %d %s", tc.method, tc.path, tc.body, a.code, a.raw, tc.code, tc.kind)
			}
			for _, p := range internalPrefixes {
				if strings.Contains(a.body.Detail, p) {
					t.Errorf("%s %s: detail %q shows %q", tc.method, tc.path, a.body.Detail, p)
				}
			}
		}
		if a := serve(api, "192.0.2.1:1", "POST", "/v1/status", ""); !strings.Contains(a.raw2(), "GET") {
			t.Errorf("405 without the allowed method: %s", a.raw)
		}
	})
}

func (a answer) raw2() string { return string(a.raw) }

// A node that is in no cluster does not know whether a lock is held: the
// lock reads say so (503 not_ready) instead of {"held":false}, unless the
// caller asks for the stale local view; /v1/status and /readyz are 503.
func TestNodeInNoClusterAnswersUnknown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := clustertest.Start(t, clustertest.Options{Nodes: 1, Net: memnet.New(), Configure: func(i int, cfg *node.Config) {
			// Joins a cluster that does not answer: in no cluster.
			cfg.Bootstrap, cfg.Peers = false, append(cfg.Peers, node.Peer{ID: "ghost", Addr: "ghost:7400"})
		}})
		api := newAPI(t, c.Nodes[0], testLimits{})
		defer closeAPI(t, api)
		time.Sleep(5 * time.Second)
		for _, path := range []string{"/v1/locks/x", "/v1/locks", "/v1/sessions"} {
			if a := serve(api, "192.0.2.1:1", "GET", path, ""); a.code != http.StatusServiceUnavailable || a.body.Error != ErrKindNotReady ||
				!strings.Contains(a.body.Detail, "unknown") {
				t.Errorf("GET %s: HTTP %d %s, want 503 not_ready", path, a.code, a.raw)
			}
		}
		if a := serve(api, "192.0.2.1:1", "GET", "/v1/locks/x?stale=1", ""); a.code != http.StatusOK || !strings.Contains(a.raw2(), `"stale":true`) {
			t.Errorf("stale read: HTTP %d %s", a.code, a.raw)
		}
		for _, path := range []string{"/v1/status", "/readyz"} {
			if a := serve(api, "192.0.2.1:1", "GET", path, ""); a.code != http.StatusServiceUnavailable || !strings.Contains(a.raw2(), "in no cluster") {
				t.Errorf("GET %s: HTTP %d %s, want 503 with the reason", path, a.code, a.raw)
			}
		}
		if a := serve(api, "192.0.2.1:1", "GET", "/healthz", ""); a.code != http.StatusOK {
			t.Errorf("healthz: %d", a.code)
		}
	})
}

// /v1/status and /readyz are 503 on a replica cut off from its quorum, 200
// on a healthy one.
func TestStatusIs503WhenNotReady(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := startCluster(t, 3)
		f := c.Follower(c.WaitLeader(time.Second))
		api := newAPI(t, c.Nodes[f], testLimits{})
		defer closeAPI(t, api)
		for _, path := range []string{"/v1/status", "/readyz"} {
			if a := serve(api, "192.0.2.1:1", "GET", path, ""); a.code != http.StatusOK {
				t.Errorf("healthy: GET %s: HTTP %d %s", path, a.code, a.raw)
			}
		}
		c.Isolate(f)
		time.Sleep(10 * c.Nodes[f].Timing().ElectionTimeout)
		for _, path := range []string{"/v1/status", "/readyz"} {
			if a := serve(api, "192.0.2.1:1", "GET", path, ""); a.code != http.StatusServiceUnavailable {
				t.Errorf("isolated: GET %s: HTTP %d %s, want 503", path, a.code, a.raw)
			}
		}
		c.Heal()
	})
}
