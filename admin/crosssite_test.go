package admin

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raftlock/raftlock/lockapi"
)

// browserRequest is one request as a browser (or a tool) would send it.
type browserRequest struct {
	method, path, body string
	host               string            // the Host header ("" keeps httptest's example.com)
	header             map[string]string // Content-Type, Origin, Sec-Fetch-Site, ...
}

// serveRequest calls api in-process with br, from a loopback client.
func serveRequest(api *Server, br browserRequest) answer {
	req := httptest.NewRequest(br.method, br.path, strings.NewReader(br.body))
	req.RemoteAddr = "127.0.0.1:40000"
	if br.host != "" {
		req.Host = br.host
	}
	for k, v := range br.header {
		req.Header.Set(k, v)
	}
	return serveReq(api, req)
}

// A page on another site (or one that rebound its own name to this
// machine's address) makes the operator's browser call an unauthenticated
// API. Each request below is what such a page can send without a CORS
// preflight — a form, a text/plain fetch, a same-origin read after DNS
// rebinding — and each did what it asked (HTTP 200) before. They are refused
// now and change nothing; what the CLI, the status page and curl with the
// documented headers send still works.
func TestCrossSiteRequestsAreRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := startCluster(t, 1)
		n := c.Nodes[0]
		api := newAPI(t, n, testLimits{})
		defer closeAPI(t, api)
		ctx := context.Background()
		holder, err := lockapi.NewSession(ctx, n, lockapi.WithTTL(5*time.Second), lockapi.WithOwner("billing"))
		if err != nil {
			t.Fatal(err)
		}
		defer holder.Close(ctx)
		if _, err := holder.Lock(ctx, "held"); err != nil {
			t.Fatal(err)
		}
		shared, err := api.Session(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// A backup taken properly, for the restore attempt below.
		backup := serveRequest(api, browserRequest{method: "GET", path: "/v1/admin/snapshot", host: "127.0.0.1:8080"})
		if backup.code != http.StatusOK {
			t.Fatalf("backup: HTTP %d %s", backup.code, backup.raw)
		}
		// A lock taken after the backup: a restore would drop it.
		if _, err := holder.Lock(ctx, "after-backup"); err != nil {
			t.Fatal(err)
		}

		const evilHost = "evil.example:8080"
		evil := map[string]string{"Origin": "http://evil.example:8080", "Sec-Fetch-Site": "cross-site"}
		with := func(h map[string]string, kv ...string) map[string]string {
			out := map[string]string{}
			for k, v := range h {
				out[k] = v
			}
			for i := 0; i+1 < len(kv); i += 2 {
				out[kv[i]] = kv[i+1]
			}
			return out
		}
		for _, tc := range []struct {
			name string
			req  browserRequest
			code int
		}{
			// The requests: foreign Origin and Host.
			{"text/plain acquire", browserRequest{"POST", "/v1/acquire", `{"lock":"csrf","wait":false}`, evilHost,
				with(evil, "Content-Type", "text/plain")}, http.StatusForbidden},
			{"form-shaped revoke", browserRequest{"POST", "/v1/admin/revoke", `{"lock":"held","why":"="}`, evilHost,
				with(evil, "Content-Type", "application/x-www-form-urlencoded")}, http.StatusForbidden},
			{"urlencoded end-session", browserRequest{"POST", "/v1/admin/end-session", `{"session":` + strconv.FormatUint(uint64(shared.ID()), 10) + `,"why":"="}`, evilHost,
				with(evil, "Content-Type", "application/x-www-form-urlencoded")}, http.StatusForbidden},
			{"rebound-Host snapshot download", browserRequest{"GET", "/v1/admin/snapshot", "", evilHost,
				map[string]string{"Sec-Fetch-Site": "same-origin"}}, http.StatusForbidden},
			{"restore without Content-Type", browserRequest{"POST", "/v1/admin/snapshot", string(backup.raw), evilHost,
				with(evil)}, http.StatusForbidden},

			// Each rule on its own, the others satisfied.
			{"text/plain acquire from loopback", browserRequest{"POST", "/v1/acquire", `{"lock":"csrf","wait":false}`, "127.0.0.1:8080",
				map[string]string{"Content-Type": "text/plain"}}, http.StatusUnsupportedMediaType},
			{"acquire without Content-Type", browserRequest{"POST", "/v1/acquire", `{"lock":"csrf","wait":false}`, "localhost:8080",
				nil}, http.StatusUnsupportedMediaType},
			{"multipart revoke", browserRequest{"POST", "/v1/admin/revoke", `{"lock":"held","why":"x"}`, "localhost",
				map[string]string{"Content-Type": "multipart/form-data; boundary=x"}}, http.StatusUnsupportedMediaType},
			{"restore without Content-Type from loopback", browserRequest{"POST", "/v1/admin/snapshot", string(backup.raw), "127.0.0.1:8080",
				nil}, http.StatusUnsupportedMediaType},
			{"restore as JSON", browserRequest{"POST", "/v1/admin/snapshot", string(backup.raw), "127.0.0.1:8080",
				map[string]string{"Content-Type": "application/json"}}, http.StatusUnsupportedMediaType},
			{"cross-site JSON acquire", browserRequest{"POST", "/v1/acquire", `{"lock":"csrf","wait":false}`, "127.0.0.1:8080",
				map[string]string{"Content-Type": "application/json", "Sec-Fetch-Site": "cross-site"}}, http.StatusForbidden},
			{"same-site JSON acquire (another port)", browserRequest{"POST", "/v1/acquire", `{"lock":"csrf","wait":false}`, "localhost:8080",
				map[string]string{"Content-Type": "application/json", "Sec-Fetch-Site": "same-site", "Origin": "http://localhost:3000"}}, http.StatusForbidden},
			{"foreign Origin without Sec-Fetch-Site", browserRequest{"POST", "/v1/acquire", `{"lock":"csrf","wait":false}`, "127.0.0.1:8080",
				map[string]string{"Content-Type": "application/json", "Origin": "http://evil.example"}}, http.StatusForbidden},
			{"Origin null", browserRequest{"POST", "/v1/acquire", `{"lock":"csrf","wait":false}`, "127.0.0.1:8080",
				map[string]string{"Content-Type": "application/json", "Origin": "null"}}, http.StatusForbidden},
			{"cross-site read", browserRequest{"GET", "/v1/locks", "", "127.0.0.1:8080",
				map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors"}}, http.StatusForbidden},
			{"rebound Host, proper JSON", browserRequest{"POST", "/v1/acquire", `{"lock":"csrf","wait":false}`, "attacker.example",
				map[string]string{"Content-Type": "application/json"}}, http.StatusForbidden},
			{"rebound Host read", browserRequest{"GET", "/v1/locks", "", "attacker.example:8080", nil}, http.StatusForbidden},
			{"localhost. is not localhost.evil", browserRequest{"GET", "/v1/locks", "", "localhost.evil.example", nil}, http.StatusForbidden},
		} {
			a := serveRequest(api, tc.req)
			if a.code != tc.code {
				t.Errorf("%s: HTTP %d %s, want %d", tc.name, a.code, a.raw, tc.code)
			}
		}
		// Nothing changed.
		synctest.Wait()
		if li, _ := n.Lock("csrf"); li.Held {
			t.Errorf("a refused acquire took the lock: %+v", li)
		}
		if li, _ := n.Lock("held"); !li.Held || lockapi.SessionID(li.Holder.Session) != holder.ID() {
			t.Errorf("a refused revoke released the lock: %+v", li)
		}
		if li, _ := n.Lock("after-backup"); !li.Held {
			t.Errorf("a refused restore replaced the lock table: %+v", li)
		}
		if err := shared.Err(); err != nil {
			t.Errorf("a refused end-session ended the shared HTTP session: %v", err)
		}

		// What the CLI, curl with the documented headers and the status page
		// send is served.
		for _, tc := range []struct {
			name string
			req  browserRequest
		}{
			{"CLI acquire", browserRequest{"POST", "/v1/acquire", `{"lock":"ok-1","wait":false}`, "127.0.0.1:8080",
				map[string]string{"Content-Type": "application/json"}}},
			{"JSON with a charset", browserRequest{"POST", "/v1/acquire", `{"lock":"ok-2","wait":false}`, "localhost:8080",
				map[string]string{"Content-Type": "application/json; charset=utf-8"}}},
			{"IPv6 loopback Host", browserRequest{"POST", "/v1/acquire", `{"lock":"ok-3","wait":false}`, "[::1]:8080",
				map[string]string{"Content-Type": "application/json"}}},
			{"a *.localhost name", browserRequest{"GET", "/v1/locks", "", "raftlock.localhost:8080", nil}},
			{"another IP address of this machine", browserRequest{"GET", "/v1/locks", "", "10.1.2.3:8080", nil}},
			{"status page read", browserRequest{"GET", "/v1/status?stale=1", "", "127.0.0.1:8080",
				map[string]string{"Sec-Fetch-Site": "same-origin", "Sec-Fetch-Mode": "cors", "Sec-Fetch-Dest": "empty"}}},
			{"typed into the address bar", browserRequest{"GET", "/v1/locks", "", "localhost:8080",
				map[string]string{"Sec-Fetch-Site": "none", "Sec-Fetch-Mode": "navigate"}}},
			{"same-origin POST", browserRequest{"POST", "/v1/acquire", `{"lock":"ok-4","wait":false}`, "127.0.0.1:8080",
				map[string]string{"Content-Type": "application/json", "Origin": "http://127.0.0.1:8080"}}},
			{"restore as octet-stream", browserRequest{"POST", "/v1/admin/snapshot", string(backup.raw), "127.0.0.1:8080",
				map[string]string{"Content-Type": "application/octet-stream"}}},
			{"public page from any Host", browserRequest{"GET", "/", "", evilHost, nil}},
			{"probe from any Host", browserRequest{"GET", "/healthz", "", evilHost, nil}},
		} {
			if a := serveRequest(api, tc.req); a.code != http.StatusOK {
				t.Errorf("%s: HTTP %d %s, want 200", tc.name, a.code, a.raw)
			}
		}
		time.Sleep(3 * time.Second) // the restore ended the shared session: let its close finish
	})
}

// Config.AllowedHosts adds names an unauthenticated API answers for;
// entries that are not host names are refused by New. With authentication
// on, the Host is not checked (a rebound page has no credentials), but
// cross-site requests are still refused: a browser attaches a client
// certificate to them by itself.
func TestAllowedHostsAndAuthenticatedCrossSite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := startCluster(t, 1)
		n := c.Nodes[0]
		for _, bad := range [][]string{{""}, {"http://raftlock.internal"}, {"raftlock.internal:8080"}, {"a b"}, {"*."}, {"x/y"}, {"**.x"}, {"a.*.x"}} {
			if _, err := New(Config{Node: n, Auth: Auth{Unauthenticated: true}, AllowedHosts: bad}); !errors.Is(err, errInvalidConfig) {
				t.Errorf("AllowedHosts %q: New accepted it (%v)", bad, err)
			}
		}
		api, err := New(Config{Node: n, TTL: time.Second, Auth: Auth{Unauthenticated: true}, AllowedHosts: []string{"raftlock.internal", "*.ops.example"}})
		if err != nil {
			t.Fatal(err)
		}
		defer closeAPI(t, api)
		for host, want := range map[string]int{
			"raftlock.internal:8080":  http.StatusOK,
			"RAFTLOCK.Internal":       http.StatusOK,
			"raftlock.internal.":      http.StatusOK,
			"r1.ops.example:8080":     http.StatusOK,
			"a.b.ops.example":         http.StatusOK,
			"ops.example":             http.StatusForbidden,
			"raftlock.internal.evil":  http.StatusForbidden,
			"xraftlock.internal":      http.StatusForbidden,
			"evil-ops.example":        http.StatusForbidden,
			"r1.ops.example.evil.com": http.StatusForbidden,
		} {
			if a := serveRequest(api, browserRequest{method: "GET", path: "/v1/whoami", host: host}); a.code != want {
				t.Errorf("Host %s: HTTP %d %s, want %d", host, a.code, a.raw, want)
			}
		}

		authed := newAuthAPI(t, n, testAuth)
		bearer := "Bearer " + lockSecret
		if a := serveRequest(authed, browserRequest{"GET", "/v1/whoami", "", "evil.example", map[string]string{"Authorization": bearer}}); a.code != http.StatusOK {
			t.Errorf("authenticated, any Host: HTTP %d %s", a.code, a.raw)
		}
		if a := serveRequest(authed, browserRequest{"POST", "/v1/acquire", `{"lock":"x"}`, "127.0.0.1",
			map[string]string{"Authorization": bearer, "Content-Type": "application/json", "Origin": "https://evil.example"}}); a.code != http.StatusForbidden {
			t.Errorf("authenticated, cross-site: HTTP %d %s, want 403", a.code, a.raw)
		}
		if a := serveRequest(authed, browserRequest{"POST", "/v1/acquire", `{"lock":"x"}`, "127.0.0.1",
			map[string]string{"Authorization": bearer, "Content-Type": "text/plain"}}); a.code != http.StatusUnsupportedMediaType {
			t.Errorf("authenticated, text/plain: HTTP %d %s, want 415", a.code, a.raw)
		}
	})
}
