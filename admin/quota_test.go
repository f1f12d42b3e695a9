package admin

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// serveFrom calls the handler in-process from a client address with a
// bearer token ("" none).
func serveFrom(api *Server, addr, secret, method, path, body string) answer {
	req := toolRequest(method, path, body)
	req.RemoteAddr = addr
	if secret != "" {
		req.Header.Set("Authorization", "Bearer "+secret)
	}
	return serveReq(api, req)
}

// The acquisition quotas count per principal: a token's leases wherever its
// clients connect from (before: per source address, so one token from 8
// addresses took 8 shares), and two tokens behind one address (a reverse
// proxy) each their own share (before: they shared one). Without
// authentication the principal is the source address, an IPv6 one by its
// /64 (one host's usual allocation).
func TestQuotasArePerPrincipal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := startCluster(t, 1)
		const held = 3
		auth := Auth{Tokens: []Token{
			{Name: "alpha", Secret: "alpha-secret-0123456789", Role: RoleLock},
			{Name: "beta", Secret: "beta-secret-0123456789", Role: RoleLock},
		}}
		api, err := New(Config{Node: c.Nodes[0], TTL: time.Second, Auth: auth, Limits: Limits{MaxHeldPerClient: held}})
		if err != nil {
			t.Fatal(err)
		}
		defer closeAPI(t, api)
		acquire := func(addr, secret, lock string) answer {
			return serveFrom(api, addr, secret, "POST", "/v1/acquire", `{"lock":"`+lock+`","wait":false}`)
		}
		// alpha from ever new addresses: its share, then 429.
		for i := range held + 2 {
			a := acquire(fmt.Sprintf("192.0.2.%d:1000", i+1), "alpha-secret-0123456789", fmt.Sprintf("alpha-%d", i))
			want := http.StatusOK
			if i >= held {
				want = http.StatusTooManyRequests
			}
			if a.code != want {
				t.Errorf("alpha's acquire %d from its %d-th address: HTTP %d %s, want %d", i+1, i+1, a.code, a.raw, want)
			}
		}
		// beta behind the address alpha used first: a share of its own.
		for i := range held {
			if a := acquire("192.0.2.1:2000", "beta-secret-0123456789", fmt.Sprintf("beta-%d", i)); a.code != http.StatusOK {
				t.Errorf("beta's acquire %d from alpha's address: HTTP %d %s", i+1, a.code, a.raw)
			}
		}

		open := newAPI(t, c.Nodes[0], testLimits{heldPerClient: held})
		defer closeAPI(t, open)
		for i := range held + 1 {
			a := serve(open, fmt.Sprintf("[2001:db8:1:2::%x]:1000", i+1), "POST", "/v1/acquire", fmt.Sprintf(`{"lock":"v6-%d","wait":false}`, i))
			want := http.StatusOK
			if i >= held {
				want = http.StatusTooManyRequests
			}
			if a.code != want {
				t.Errorf("acquire %d from one /64: HTTP %d %s, want %d", i+1, a.code, a.raw, want)
			}
		}
		if a := serve(open, "[2001:db8:1:3::1]:1000", "POST", "/v1/acquire", `{"lock":"v6-other","wait":false}`); a.code != http.StatusOK {
			t.Errorf("acquire from another /64: HTTP %d %s", a.code, a.raw)
		}
	})
}

// Long polls — lease waits and waiting acquires — are counted per principal
// and in total (before: a lease wait was counted by nothing, and 2,000 of
// them from one address stayed open), and no wait is longer than
// Limits.MaxWait: a lease wait asking more is shortened, an acquire refused.
func TestLongPollsAreCapped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := startCluster(t, 1)
		api, err := New(Config{Node: c.Nodes[0], TTL: time.Second, Auth: Auth{Unauthenticated: true},
			Limits: Limits{MaxPollsPerClient: 2, MaxPolls: 3, MaxWait: time.Minute}})
		if err != nil {
			t.Fatal(err)
		}
		defer closeAPI(t, api)
		const a, b = "192.0.2.1:1000", "192.0.2.2:1000"
		var lease AcquireResponse
		if ans := serve(api, a, "POST", "/v1/acquire", `{"lock":"polled","wait":false,"session":"replica"}`); ans.code != http.StatusOK {
			t.Fatalf("acquire: HTTP %d %s", ans.code, ans.raw)
		} else {
			json.Unmarshal(ans.raw, &lease)
		}
		wait := "/v1/lease/wait?handle=" + lease.Handle + "&timeout_ms=3600000"
		// started starts a long poll and reports whether it is still open once
		// everything else is blocked.
		started := func(client, method, path, body string) <-chan answer {
			ch := serveAsync(api, client, method, path, body)
			synctest.Wait()
			return ch
		}
		open := func(ch <-chan answer) bool {
			select {
			case ans := <-ch:
				t.Logf("answered at once: HTTP %d %s", ans.code, ans.raw)
				return false
			default:
				return true
			}
		}
		refused := func(what string, ch <-chan answer) {
			t.Helper()
			select {
			case ans := <-ch:
				if ans.code != http.StatusTooManyRequests || ans.body.Error != ErrKindClientQuota {
					t.Errorf("%s: HTTP %d %s, want 429 client_quota", what, ans.code, ans.raw)
				}
			default:
				t.Errorf("%s: still waiting, want 429 at once", what)
			}
		}
		a1 := started(a, "GET", wait, "")
		a2 := started(a, "GET", wait, "")
		if !open(a1) || !open(a2) {
			t.Fatalf("a's first two lease waits did not wait")
		}
		refused("a's third lease wait (per-client cap 2)", started(a, "GET", wait, ""))
		refused("a's waiting acquire (per-client cap 2)", started(a, "POST", "/v1/acquire", `{"lock":"polled","wait":true,"timeout_ms":5000}`))
		b1 := started(b, "POST", "/v1/acquire", `{"lock":"polled","wait":true,"timeout_ms":50000}`)
		if !open(b1) {
			t.Fatalf("b's waiting acquire did not wait")
		}
		refused("b's lease wait (total cap 3)", started(b, "GET", wait, ""))
		if ans := serve(api, b, "POST", "/v1/acquire", `{"lock":"polled","wait":true,"timeout_ms":60001}`); ans.code != http.StatusBadRequest {
			t.Errorf("an acquire waiting longer than MaxWait: HTTP %d %s, want 400", ans.code, ans.raw)
		}
		// The lease waits asked an hour and get MaxWait.
		start := time.Now()
		for _, ch := range []<-chan answer{a1, a2} {
			ans := <-ch
			var lj LeaseJSON
			json.Unmarshal(ans.raw, &lj)
			if ans.code != http.StatusOK || !lj.Valid {
				t.Errorf("lease wait: HTTP %d %s", ans.code, ans.raw)
			}
		}
		if took := time.Since(start); took > time.Minute {
			t.Errorf("the hour-long lease waits answered after %v (MaxWait 1m)", took)
		}
		ans := <-b1
		if ans.code != http.StatusGatewayTimeout {
			t.Errorf("b's waiting acquire: HTTP %d %s, want 504", ans.code, ans.raw)
		}
		synctest.Wait()
		for _, client := range []string{"192.0.2.1", "192.0.2.2"} {
			if u := api.quotas.usageOf(client); u.polls != 0 || u.inFlight != 0 {
				t.Errorf("%s: %+v counted after every poll ended", client, u)
			}
		}
		serve(api, a, "POST", "/v1/release", `{"handle":"`+lease.Handle+`"}`)
	})
}

// The limits that bound one another are checked with their defaults in.
func TestLimitsValidate(t *testing.T) {
	for name, l := range map[string]Limits{
		"negative":                      {MaxPolls: -1},
		"per-client polls above total":  {MaxPollsPerClient: 2000},
		"per-address conns above total": {MaxConnsPerAddr: 4096},
		"held above total":              {MaxHeldPerClient: 9000},
		"max wait under 30 s":           {MaxWait: time.Second},
	} {
		if err := l.Validate(); err == nil {
			t.Errorf("%s: %+v accepted", name, l)
		}
	}
	if err := DefaultLimits().Validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
	for name, l := range map[string]Limits{
		"zero":                              {},
		"a small total, per-client default": {MaxConns: 100, MaxPolls: 10, MaxAcquisitions: 50},
	} {
		if err := l.Validate(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if d := l.withDefaults(); d.MaxConnsPerAddr > d.MaxConns || d.MaxPollsPerClient > d.MaxPolls || d.MaxHeldPerClient > d.MaxAcquisitions {
			t.Errorf("%s: defaults above their totals: %+v", name, d)
		}
	}
	if !strings.Contains(fmt.Sprint((Limits{MaxConnsPerAddr: 4096}).Validate()), "MaxConnsPerAddr") {
		t.Errorf("the error does not name the limit")
	}
}
