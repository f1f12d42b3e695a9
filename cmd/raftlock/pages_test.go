package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
)

// locks and sessions ask for one page (-limit, -after, the prefix) and say
// how to ask for the next; out-of-range limits are usage errors.
func TestListingCommandsPage(t *testing.T) {
	var mu sync.Mutex
	var asked []url.Values
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		asked = append(asked, r.URL.Query())
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/v1/locks":
			w.Write([]byte(`{"locks":[{"name":"job/1","held":false,"holder":null,"waiters":[],"waiter_count":0}],"next":"job/1"}`))
		case "/v1/sessions":
			w.Write([]byte(`{"sessions":[{"id":7,"description":"d","ttl_ms":5000,"lock_delay_ms":0,"created_at_unix_ms":0,"locks":0}],"total":12,"next":7}`))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	cmd := func(args ...string) (string, int) {
		var out, errOut bytes.Buffer
		code := run(context.Background(), append([]string{"-addr", srv.URL}, args...), func(string) string { return "" }, stdio{strings.NewReader(""), &out, &errOut})
		return out.String() + errOut.String(), code
	}

	out, code := cmd("locks", "-limit", "1", "-after", "job/0", "job/")
	if code != 0 || !strings.Contains(out, "job/1") || !strings.Contains(out, `raftlock locks -after "job/1"`) {
		t.Errorf("locks: exit %d\n%s", code, out)
	}
	out, code = cmd("sessions", "-after", "3", "-limit", "1")
	if code != 0 || !strings.Contains(out, "12 sessions in all") || !strings.Contains(out, "raftlock sessions -after 7") {
		t.Errorf("sessions: exit %d\n%s", code, out)
	}
	mu.Lock()
	if len(asked) != 2 || asked[0].Get("limit") != "1" || asked[0].Get("after") != "job/0" || asked[0].Get("prefix") != "job/" ||
		asked[1].Get("after") != "3" || asked[1].Get("limit") != "1" {
		t.Errorf("queries asked: %v", asked)
	}
	mu.Unlock()
	for _, args := range [][]string{{"locks", "-limit", "0"}, {"locks", "-limit", "1001"}, {"sessions", "-limit", "0"}, {"sessions", "x"}, {"sessions", "-after", "x"}} {
		if out, code := cmd(args...); code != exitUsage {
			t.Errorf("%q: exit %d, want %d\n%s", args, code, exitUsage, out)
		}
	}
}
