package admin

import (
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
)

// Request bodies are strict: a field name in another case ("Lock", which
// encoding/json used to fold into "lock" and acquire with), an unknown or
// repeated field, anything but one object are 400 and change nothing.
func TestRequestBodiesAreStrict(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, api := startAPI(t)
		for _, tc := range []struct {
			path, body, detail string
		}{
			{"/v1/acquire", `{"Lock":"x"}`, `unknown field "Lock" (field names are case-sensitive: "lock")`},
			{"/v1/acquire", `{"lock":"x","WAIT":true}`, `"WAIT"`},
			{"/v1/acquire", `{"lock":"x","TTL_MS":5000}`, `case-sensitive`},
			{"/v1/acquire", `{"lock":"x","lock":"y"}`, `field "lock" given twice`},
			{"/v1/acquire", `{"lock":"x","extra":1}`, `unknown field "extra"`},
			{"/v1/acquire", `null`, `want a JSON object, not null`},
			{"/v1/acquire", `[{"lock":"x"}]`, `not an array`},
			{"/v1/acquire", `"x"`, `not a string`},
			{"/v1/acquire", `{"lock":"x"} {}`, `data after the JSON object`},
			{"/v1/acquire", `{"lock":"x"`, ``},
			{"/v1/release", `{"Handle":"abc"}`, `case-sensitive`},
			{"/v1/admin/revoke", `{"lock":"x","Why":"w"}`, `case-sensitive`},
		} {
			a := serve(api, "192.0.2.1:1", "POST", tc.path, tc.body)
			if a.code != http.StatusBadRequest || a.body.Error != ErrKindBadRequest || !strings.Contains(a.body.Detail, tc.detail) {
				t.Errorf("%s %s: HTTP %d %s, want 400 saying %s", tc.path, tc.body, a.code, a.raw, tc.detail)
			}
		}
		if li, ok := api.n.Lock("x"); ok && (li.Held || len(li.Waiters) > 0) {
			t.Errorf("a refused body acquired: %+v", li)
		}
		if a := serve(api, "192.0.2.1:1", "POST", "/v1/acquire", ` {"lock":"x", "wait":false} `); a.code != http.StatusOK {
			t.Errorf("a proper body: HTTP %d %s", a.code, a.raw)
		}
	})
}

// The Bearer scheme's name is matched in any case (RFC 7235 §2.1: "bearer"
// was refused); other schemes and an empty token are not credentials.
func TestBearerSchemeInAnyCase(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := startCluster(t, 1)
		api := newAuthAPI(t, c.Nodes[0], testAuth)
		for _, tc := range []struct {
			header string
			code   int
		}{
			{"Bearer " + readSecret, http.StatusOK},
			{"bearer " + readSecret, http.StatusOK},
			{"BEARER " + readSecret, http.StatusOK},
			{"bEaReR  " + readSecret, http.StatusOK},
			{"Basic " + readSecret, http.StatusUnauthorized},
			{"Bearer", http.StatusUnauthorized},
			{"Bearer ", http.StatusUnauthorized},
			{"Bearerx " + readSecret, http.StatusUnauthorized},
			{"Bearer " + readSecret + "x", http.StatusUnauthorized},
		} {
			req := toolRequest("GET", "/v1/whoami", "")
			req.RemoteAddr = "192.0.2.1:1"
			req.Header.Set("Authorization", tc.header)
			if a := serveReq(api, req); a.code != tc.code {
				t.Errorf("Authorization %q: HTTP %d %s, want %d", tc.header, a.code, a.raw, tc.code)
			}
		}
	})
}

// /metrics without a Gatherer says so (it was a bare 404 "no such path").
func TestMetricsWithoutGathererSaysSo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, api := startAPI(t)
		a := serve(api, "192.0.2.1:1", "GET", "/metrics", "")
		if a.code != http.StatusNotImplemented || a.body.Error != ErrKindNotConfigured || a.body.Detail != "metrics not configured (admin.Config.Gatherer)" {
			t.Errorf("GET /metrics: HTTP %d %s", a.code, a.raw)
		}
	})
}
