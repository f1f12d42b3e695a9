package admin

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raftlock/raftlock/internal/testing/clustertest"
	"github.com/raftlock/raftlock/internal/testing/memnet"
	"github.com/raftlock/raftlock/lockapi"
)

// startCluster starts an in-memory cluster of n nodes (inside a synctest
// bubble) and waits until it is ready.
func startCluster(t *testing.T, n int) *clustertest.Cluster {
	t.Helper()
	c := clustertest.Start(t, clustertest.Options{Nodes: n, Net: memnet.New()})
	c.WaitLeader(10 * time.Second)
	c.WaitReady(10 * time.Second)
	return c
}

// startAPI starts a one-node cluster and a Server with the default limits
// on it (closed at the end).
func startAPI(t *testing.T) (*clustertest.Cluster, *Server) {
	t.Helper()
	c := startCluster(t, 1)
	api := newAPI(t, c.Nodes[0], testLimits{})
	t.Cleanup(func() { closeAPI(t, api) })
	return c, api
}

func closeAPI(t *testing.T, api *Server) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	api.Close(ctx)
}

// answer is one HTTP answer of a handler called in-process.
type answer struct {
	code int
	body ErrorJSON
	raw  []byte
}

// serve calls the API's handler in-process from client (an ip:port), as a
// tool would: Host localhost, a body's Content-Type set.
func serve(api *Server, client, method, path, body string) answer {
	req := toolRequest(method, path, body)
	req.RemoteAddr = client
	return serveReq(api, req)
}

// serveReq calls the API's handler in-process with req.
func serveReq(api *Server, req *http.Request) answer {
	rec := httptest.NewRecorder()
	api.Handler().ServeHTTP(rec, req)
	a := answer{code: rec.Code, raw: rec.Body.Bytes()}
	json.Unmarshal(a.raw, &a.body)
	return a
}

// toolRequest is a request as the CLI sends it: Host localhost and, for a
// POST, the Content-Type of the route's body.
func toolRequest(method, path, body string) *http.Request {
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.Host = "localhost:8080"
	if method == http.MethodPost {
		ct := bodyJSON
		if strings.HasPrefix(path, "/v1/admin/snapshot") {
			ct = bodyBackup
		}
		req.Header.Set("Content-Type", ct)
	}
	return req
}

// serveAsync is serve in a goroutine.
func serveAsync(api *Server, client, method, path, body string) <-chan answer {
	ch := make(chan answer, 1)
	go func() { ch <- serve(api, client, method, path, body) }()
	return ch
}

// A TryLock through a replica outside a quorum answers 503 no_quorum within
// a few election timeouts — also when the HTTP session is not open yet (its
// opening used to wait with no deadline) — and so does a waiting acquire
// within its timeout.
func TestAcquireWithoutQuorumAnswersNoQuorum(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := startCluster(t, 3)
		m := c.Follower(c.WaitLeader(time.Second))
		c.Isolate(m)
		api := newAPI(t, c.Nodes[m], testLimits{})
		defer closeAPI(t, api)
		for _, tc := range []struct {
			body  string
			limit time.Duration
		}{
			{`{"lock":"x","wait":false}`, 2 * lockapi.TryTimeout(c.Nodes[m])},
			{`{"lock":"x","wait":true,"timeout_ms":700}`, 2 * time.Second},
		} {
			start := time.Now()
			select {
			case a := <-serveAsync(api, "192.0.2.1:1000", "POST", "/v1/acquire", tc.body):
				if a.code != http.StatusServiceUnavailable || a.body.Error != ErrKindNoQuorum {
					t.Errorf("%s: HTTP %d %s, want 503 no_quorum", tc.body, a.code, a.raw)
				}
				if took := time.Since(start); took > tc.limit {
					t.Errorf("%s: answered after %v", tc.body, took)
				}
			case <-time.After(60 * time.Second):
				t.Errorf("%s: no answer within 60 s", tc.body)
				c.Heal()
			}
		}
		c.Heal()
	})
}

// One client cannot have more acquire calls in flight than its quota; other
// clients are not affected.
func TestClientInFlightQuota(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := startCluster(t, 1)
		api := newAPI(t, c.Nodes[0], testLimits{inFlightPerClient: 4})
		defer closeAPI(t, api)
		ctx := context.Background()
		holder, err := lockapi.NewSession(ctx, c.Nodes[0], lockapi.WithTTL(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		defer holder.Close(ctx)
		held, err := holder.Lock(ctx, "q")
		if err != nil {
			t.Fatal(err)
		}
		const a, b = "192.0.2.1:1000", "192.0.2.2:2000"
		// lockAndRelease waits for q and releases it at once.
		lockAndRelease := func(client string) <-chan answer {
			ch := make(chan answer, 1)
			go func() {
				ans := serve(api, client, "POST", "/v1/acquire", `{"lock":"q","wait":true,"timeout_ms":60000}`)
				var ok AcquireResponse
				if json.Unmarshal(ans.raw, &ok) == nil && ok.Handle != "" {
					serve(api, client, "POST", "/v1/release", `{"handle":"`+ok.Handle+`"}`)
				}
				ch <- ans
			}()
			return ch
		}
		var waiting []<-chan answer
		for range 4 {
			waiting = append(waiting, lockAndRelease(a))
		}
		synctest.Wait()
		fifth := serveAsync(api, a, "POST", "/v1/acquire", `{"lock":"q","wait":true,"timeout_ms":2000}`)
		select {
		case ans := <-fifth:
			if ans.code != http.StatusTooManyRequests || ans.body.Error != ErrKindClientQuota {
				t.Errorf("fifth acquire of one client: HTTP %d %s, want 429 client_quota", ans.code, ans.raw)
			}
		case <-time.After(time.Second):
			t.Errorf("fifth acquire of one client was not refused at once")
			<-fifth
		}
		other := lockAndRelease(b)
		synctest.Wait()
		select {
		case ans := <-other:
			t.Errorf("another client's acquire was not queued: HTTP %d %s", ans.code, ans.raw)
		default:
		}
		held.Unlock(ctx)
		for _, ch := range append(waiting, other) {
			ans := <-ch
			if ans.code != http.StatusOK {
				t.Errorf("queued acquire: HTTP %d %s", ans.code, ans.raw)
			}
		}
		synctest.Wait() // the quota forgets a lease when it ends (context.AfterFunc)
		if u := api.quotas.usageOf("192.0.2.1"); u != (usage{}) {
			t.Errorf("client quota usage after every lease was released: %+v", u)
		}
	})
}

// Oversized, unknown-field and trailing-data bodies are refused before
// anything is done.
func TestBodyLimits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, api := startAPI(t)
		big := `{"lock":"` + strings.Repeat("x", 1<<20) + `"}`
		for _, tc := range []struct {
			body string
			code int
			kind string
		}{
			{big, http.StatusRequestEntityTooLarge, ErrKindTooLarge},
			{`{"lock":"x","wait":false,"holder":"me"}`, http.StatusBadRequest, ErrKindBadRequest},
			{`{"lock":"x"} {"lock":"y"}`, http.StatusBadRequest, ErrKindBadRequest},
			{``, http.StatusBadRequest, ErrKindBadRequest},
		} {
			a := serve(api, "192.0.2.1:1", "POST", "/v1/acquire", tc.body)
			if a.code != tc.code || a.body.Error != tc.kind {
				t.Errorf("body %.40q: HTTP %d %.200s, want %d %s", tc.body, a.code, a.raw, tc.code, tc.kind)
			}
		}
		if st := c.Nodes[0].Stats(); st.Locks != 0 {
			t.Errorf("a refused body changed the cluster: %+v", st)
		}
	})
}

// Listings are bounded: at most ?waiters= waiters per lock (waiter_count
// tells the queue's length), at most ?limit= locks; out-of-range values are
// refused.
func TestListingsAreBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, api := startAPI(t)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var sessions []*lockapi.Session
		for range 21 {
			s, err := lockapi.NewSession(ctx, c.Nodes[0], lockapi.WithTTL(time.Second))
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close(context.Background())
			sessions = append(sessions, s)
		}
		if _, err := sessions[0].Lock(ctx, "x"); err != nil {
			t.Fatal(err)
		}
		for _, s := range sessions[1:] {
			go s.Lock(ctx, "x")
		}
		synctest.Wait()
		a := serve(api, "192.0.2.1:1", "GET", "/v1/locks/x?waiters=5", "")
		var li LockJSON
		json.Unmarshal(a.raw, &li)
		if a.code != http.StatusOK || len(li.Waiters) != 5 || li.WaiterCount != 20 || li.Waiters[0].Description == "" {
			t.Errorf("GET /v1/locks/x?waiters=5: HTTP %d, %d waiters listed, waiter_count %d: %s", a.code, len(li.Waiters), li.WaiterCount, a.raw)
		}
		for _, path := range []string{"/v1/locks/x?waiters=0", "/v1/locks/x?waiters=1000000", "/v1/locks?limit=0", "/v1/locks?limit=-1", "/v1/locks?waiters=x"} {
			if a := serve(api, "192.0.2.1:1", "GET", path, ""); a.code != http.StatusBadRequest {
				t.Errorf("GET %s: HTTP %d %s, want 400", path, a.code, a.raw)
			}
		}
		cancel()
	})
}

func stringsReader(s string) io.Reader { return strings.NewReader(s) }

func decodeResp(t *testing.T, resp *http.Response, v any) {
	t.Helper()
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("answer: %v", err)
	}
}
