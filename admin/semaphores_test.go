package admin

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/lockapi"
)

// The lock listing and the status show semaphores (limit, permits held,
// holders, waiters) and read-write locks (readers, values).
func TestStatusShowsSemaphoresAndReaders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, api := startAPI(t)
		for c.Nodes[0].Status().ClusterVersion < fsm.MaxClusterVersion {
			time.Sleep(10 * time.Millisecond)
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		s, err := lockapi.NewSession(ctx, c.Nodes[0], lockapi.WithTTL(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close(context.Background())
		s2, err := lockapi.NewSession(ctx, c.Nodes[0], lockapi.WithTTL(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		defer s2.Close(context.Background())
		sem := lockapi.Semaphore{Name: "pool", Limit: 3}
		if _, err := s.Acquire(ctx, sem, 2, lockapi.WithValue("w1")); err != nil {
			t.Fatal(err)
		}
		go s2.Acquire(ctx, sem, 2)
		if _, err := s.RLock(ctx, "doc"); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		var pool, doc LockJSON
		json.Unmarshal(serve(api, "192.0.2.1:1", "GET", "/v1/locks/pool", "").raw, &pool)
		json.Unmarshal(serve(api, "192.0.2.1:1", "GET", "/v1/locks/doc", "").raw, &doc)
		if pool.Limit != 3 || pool.Used != 2 || len(pool.Shared) != 1 || pool.Shared[0].Permits != 2 || pool.Shared[0].Value != "w1" ||
			len(pool.Waiters) != 1 || pool.Waiters[0].Permits != 2 {
			t.Fatalf("semaphore: %+v", pool)
		}
		if doc.Held || len(doc.Shared) != 1 || doc.Limit != 0 {
			t.Fatalf("read-locked: %+v", doc)
		}
		a := serve(api, "192.0.2.1:1", "GET", "/v1/status", "")
		var st StatusJSON
		json.Unmarshal(a.raw, &st)
		if a.code != http.StatusOK || st.FSM.Readers != 1 || st.FSM.Semaphores != 1 || st.FSM.PermitsHeld != 2 {
			t.Fatalf("status %d: %+v", a.code, st.FSM)
		}
		cancel()
	})
}

// POST /v1/acquire with a limit takes permits of a semaphore: two of a
// limit of 2 are granted, a third TryLock is 409 locked, another limit for
// the same name 409 conflict, more permits than the limit 400.
func TestAcquireSemaphorePermits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, api := startAPI(t)
		for c.Nodes[0].Status().ClusterVersion < fsm.MaxClusterVersion {
			time.Sleep(10 * time.Millisecond)
		}
		for i, tc := range []struct {
			body string
			code int
			kind string
		}{
			{`{"lock":"pool","limit":2}`, 200, ""},
			{`{"lock":"pool","limit":2,"permits":1}`, 200, ""},
			{`{"lock":"pool","limit":2}`, 409, ErrKindLocked},
			{`{"lock":"pool","limit":3}`, 409, ErrKindConflict},
			{`{"lock":"pool","limit":2,"permits":3}`, 400, ErrKindBadRequest},
			{`{"lock":"pool","permits":1}`, 400, ErrKindBadRequest},
		} {
			a := serve(api, "192.0.2.1:1", "POST", "/v1/acquire", tc.body)
			if a.code != tc.code || a.body.Error != tc.kind {
				t.Errorf("%d: %s: HTTP %d %+v, want %d %q", i, tc.body, a.code, a.body, tc.code, tc.kind)
			}
		}
		var pool LockJSON
		json.Unmarshal(serve(api, "192.0.2.1:1", "GET", "/v1/locks/pool", "").raw, &pool)
		if pool.Limit != 2 || pool.Used != 2 || len(pool.Shared) != 2 || pool.Shared[0].Token == pool.Shared[1].Token {
			t.Errorf("semaphore: %+v", pool)
		}
	})
}
