package admin

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raftlock/raftlock/internal/devcerts"
	"github.com/raftlock/raftlock/node"
)

const (
	readSecret  = "read-secret-0123456789"
	lockSecret  = "lock-secret-0123456789"
	adminSecret = "admin-secret-0123456789"
)

var testAuth = Auth{Tokens: []Token{
	{Name: "viewer", Secret: readSecret, Role: RoleRead},
	{Name: "worker", Secret: lockSecret, Role: RoleLock},
	{Name: "ops", Secret: adminSecret, Role: RoleAdmin},
}}

// newAuthAPI returns a Server on n with auth (closed at the end).
func newAuthAPI(t *testing.T, n *node.Node, auth Auth) *Server {
	t.Helper()
	api, err := New(Config{Node: n, TTL: time.Second, Auth: auth})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeAPI(t, api) })
	return api
}

// serveAs calls the handler in-process with a bearer token ("" none).
func serveAs(api *Server, secret, method, path, body string) answer {
	return serveFrom(api, "192.0.2.1:1000", secret, method, path, body)
}

func TestAuthIsRequiredUnlessExplicitlyOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := startCluster(t, 1)
		n := c.Nodes[0]
		for name, auth := range map[string]Auth{
			"zero":          {},
			"short secret":  {Tokens: []Token{{Name: "a", Secret: "short", Role: RoleAdmin}}},
			"no role":       {Tokens: []Token{{Name: "a", Secret: adminSecret}}},
			"no name":       {Tokens: []Token{{Secret: adminSecret, Role: RoleRead}}},
			"same secret":   {Tokens: []Token{{Name: "a", Secret: adminSecret, Role: RoleRead}, {Name: "b", Secret: adminSecret, Role: RoleAdmin}}},
			"bad cert role": {ClientCertRole: "root"},
		} {
			if _, err := New(Config{Node: n, Auth: auth}); !errors.Is(err, errInvalidConfig) {
				t.Errorf("%s: New accepted it: %v", name, err)
			}
		}
		api := newAuthAPI(t, n, testAuth)
		for _, tc := range []struct {
			secret, method, path, body string
			code                       int
			kind                       string
		}{
			{"", "GET", "/healthz", "", http.StatusOK, ""},
			{"", "GET", "/", "", http.StatusOK, ""},
			{"", "GET", "/readyz", "", http.StatusOK, ""},
			{"", "GET", "/v1/status", "", http.StatusUnauthorized, ErrKindUnauthorized},
			{"wrong-secret-0123456789", "GET", "/v1/status", "", http.StatusUnauthorized, ErrKindUnauthorized},
			{readSecret, "GET", "/v1/status", "", http.StatusOK, ""},
			{readSecret, "GET", "/v1/locks", "", http.StatusOK, ""},
			{readSecret, "POST", "/v1/acquire", `{"lock":"x"}`, http.StatusForbidden, ErrKindForbidden},
			{lockSecret, "POST", "/v1/acquire", `{"lock":"x"}`, http.StatusOK, ""},
			{lockSecret, "POST", "/v1/admin/revoke", `{"lock":"x"}`, http.StatusForbidden, ErrKindForbidden},
			{lockSecret, "GET", "/v1/admin/snapshot", "", http.StatusForbidden, ErrKindForbidden},
			{adminSecret, "POST", "/v1/admin/revoke", `{"lock":"x","why":"test"}`, http.StatusOK, ""},
		} {
			a := serveAs(api, tc.secret, tc.method, tc.path, tc.body)
			if a.code != tc.code || (tc.kind != "" && a.body.Error != tc.kind) {
				t.Errorf("%s %s with %q: HTTP %d %s, want %d %s", tc.method, tc.path, tc.secret, a.code, a.raw, tc.code, tc.kind)
			}
		}
		var who map[string]string
		json.Unmarshal(serveAs(api, lockSecret, "GET", "/v1/whoami", "").raw, &who)
		if who["name"] != "worker" || who["role"] != "lock" {
			t.Errorf("whoami %v", who)
		}
	})
}

// A verified client certificate authenticates as cert:<CN> with the
// configured role; a connection without one gets 401.
func TestAuthByClientCertificate(t *testing.T) {
	c := startCluster(t, 1)
	api := newAuthAPI(t, c.Nodes[0], Auth{ClientCertRole: RoleRead})
	ca, err := devcerts.NewCA("admin test CA")
	if err != nil {
		t.Fatal(err)
	}
	caPEM, certPEM, keyPEM, err := ca.PEM("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(api.Handler())
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: pool, ClientAuth: tls.VerifyClientCertIfGiven}
	srv.StartTLS()
	defer srv.Close()
	get := func(certs []tls.Certificate) (int, string) {
		hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: certs}}}
		defer hc.CloseIdleConnections()
		resp, err := hc.Get(srv.URL + "/v1/whoami")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get([]tls.Certificate{cert}); code != http.StatusOK || !strings.Contains(body, `"cert:127.0.0.1"`) || !strings.Contains(body, `"read"`) {
		t.Errorf("with a client certificate: %d %s", code, body)
	}
	if code, body := get(nil); code != http.StatusUnauthorized {
		t.Errorf("without one: %d %s", code, body)
	}
}
