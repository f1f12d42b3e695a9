package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raftlock/raftlock/internal/testing/clustertest"
	"github.com/raftlock/raftlock/lockapi"
)

// An operator revokes a lock through the API: the holder's lease ends
// (ErrLeaseLost, "revoked"), the waiter gets it with a higher token, and
// the answer names who revoked it.
func TestRevokeOverHTTP(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := startCluster(t, 3)
		li := c.WaitLeader(time.Second)
		f := c.Follower(li)
		api := newAuthAPI(t, c.Nodes[li], testAuth)
		ctx := context.Background()
		holder, err := lockapi.NewSession(ctx, c.Nodes[f], lockapi.WithTTL(5*time.Second), lockapi.WithOwner("billing-7"))
		if err != nil {
			t.Fatal(err)
		}
		defer holder.Close(ctx)
		lease, err := holder.Lock(ctx, "invoice:1")
		if err != nil {
			t.Fatal(err)
		}
		waiter, err := lockapi.NewSession(ctx, c.Nodes[li], lockapi.WithTTL(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		defer waiter.Close(ctx)
		next := make(chan *lockapi.Lease, 1)
		go func() {
			l, err := waiter.Lock(ctx, "invoice:1")
			if err != nil {
				t.Error(err)
			}
			next <- l
		}()
		synctest.Wait()
		a := serveAs(api, adminSecret, "POST", "/v1/admin/revoke", `{"lock":"invoice:1","why":"stuck since the deploy"}`)
		var rv RevokeResponse
		json.Unmarshal(a.raw, &rv)
		if a.code != http.StatusOK || rv.By != "ops" || rv.Kind != "exclusive" || rv.Holder.Token != lease.Token() || rv.Holder.Description != "billing-7" {
			t.Fatalf("revoke: HTTP %d %s", a.code, a.raw)
		}
		select {
		case <-lease.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("the revoked lease did not end")
		}
		if err := lease.Err(); !errors.Is(err, lockapi.ErrLeaseLost) || !strings.Contains(err.Error(), "revoked") {
			t.Fatalf("lease error %v", err)
		}
		l := <-next
		if l.Token() <= lease.Token() {
			t.Fatalf("next token %d not above the revoked %d", l.Token(), lease.Token())
		}
		if holder.Err() != nil {
			t.Fatalf("the holder's session ended: %v", holder.Err())
		}
	})
}

// A backup taken through one replica's API restores through another's.
func TestSnapshotOverHTTP(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := startCluster(t, 3)
		li := c.WaitLeader(time.Second)
		api := newAuthAPI(t, c.Nodes[c.Follower(li)], testAuth)
		ctx := context.Background()
		s, err := lockapi.NewSession(ctx, c.Nodes[li], lockapi.WithTTL(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		l, err := s.Lock(ctx, "job")
		if err != nil {
			t.Fatal(err)
		}
		req := httptest.NewRequest("GET", "/v1/admin/snapshot", nil)
		req.Header.Set("Authorization", "Bearer "+adminSecret)
		rec := httptest.NewRecorder()
		api.ServeHTTP(rec, req)
		backup := rec.Body.Bytes()
		if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "application/octet-stream" || !bytes.HasPrefix(backup, []byte("RLKS")) {
			t.Fatalf("snapshot: HTTP %d %q %.20q", rec.Code, rec.Header().Get("Content-Type"), backup)
		}
		s.Close(ctx)
		a := serveAs(api, adminSecret, "POST", "/v1/admin/snapshot", string(backup))
		var rr RestoreResponse
		json.Unmarshal(a.raw, &rr)
		if a.code != http.StatusOK || rr.Held != 1 || rr.LastToken < l.Token() {
			t.Fatalf("restore: HTTP %d %s", a.code, a.raw)
		}
		if a := serveAs(api, readSecret, "GET", "/v1/locks/job?sync=1", ""); !strings.Contains(string(a.raw), `"held":true`) {
			t.Fatalf("after the restore: %s", a.raw)
		}
		// The restore ended the shared HTTP session: let its background
		// close finish before the bubble ends.
		time.Sleep(3 * time.Second)
	})
}

// A client-kept lease (its own session, ttl_ms) is released when its
// client stops asking about it; one whose client asks stays.
func TestClientKeptLeases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := startCluster(t, 1)
		api := newAuthAPI(t, c.Nodes[0], testAuth)
		var kept, dropped AcquireResponse
		for name, out := range map[string]*AcquireResponse{"kept": &kept, "dropped": &dropped} {
			a := serveAs(api, lockSecret, "POST", "/v1/acquire", `{"lock":"`+name+`","ttl_ms":1000,"owner":"cli pid 7"}`)
			json.Unmarshal(a.raw, out)
			if a.code != http.StatusOK || out.TTLMS != 1000 || out.ValidForMS <= 0 || out.ValidForMS > 1000 {
				t.Fatalf("acquire %s: HTTP %d %s", name, a.code, a.raw)
			}
		}
		var li LockJSON
		json.Unmarshal(serveAs(api, readSecret, "GET", "/v1/locks/kept", "").raw, &li)
		if li.Holder == nil || li.Holder.Description != "cli pid 7" || li.Holder.TTLMS != 1000 || li.Holder.LeaseLeftMS == nil {
			t.Fatalf("holder %+v", li.Holder)
		}
		for range 8 {
			time.Sleep(300 * time.Millisecond)
			var lj LeaseJSON
			json.Unmarshal(serveAs(api, lockSecret, "GET", "/v1/lease?handle="+kept.Handle, "").raw, &lj)
			if !lj.Valid || lj.ValidForMS <= 0 {
				t.Fatalf("the kept lease ended: %+v", lj)
			}
		}
		var lj LeaseJSON
		json.Unmarshal(serveAs(api, lockSecret, "GET", "/v1/lease?handle="+dropped.Handle, "").raw, &lj)
		if lj.Valid {
			t.Fatalf("a lease nobody asked about for 2.4 s (TTL 1 s) is still valid: %+v", lj)
		}
		if _, held := c.Nodes[0].Holder("dropped"); held {
			t.Fatal("the dropped lease's lock is still held")
		}
		if _, held := c.Nodes[0].Holder("kept"); !held {
			t.Fatal("the kept lease's lock is free")
		}
	})
}

// Releasing a client-kept lease is 200 and frees the lock at once. Before,
// the release raced the close of the lease's own session (which its end
// started): 503 "the session ended before the release committed". Real
// time and loopback TCP: the race needs real goroutine scheduling.
func TestReleaseClientKeptLease(t *testing.T) {
	{
		c := clustertest.Start(t, clustertest.Options{Nodes: 1})
		c.WaitReady(30 * time.Second)
		api := newAuthAPI(t, c.Nodes[0], testAuth)
		for i := range 20 {
			var ar AcquireResponse
			a := serveAs(api, lockSecret, "POST", "/v1/acquire", `{"lock":"job","ttl_ms":3000}`)
			json.Unmarshal(a.raw, &ar)
			if a.code != http.StatusOK {
				t.Fatalf("%d: acquire: HTTP %d %s", i, a.code, a.raw)
			}
			if a := serveAs(api, lockSecret, "POST", "/v1/release", `{"handle":"`+ar.Handle+`"}`); a.code != http.StatusOK {
				t.Fatalf("%d: release: HTTP %d %s", i, a.code, a.raw)
			}
			if _, held := c.Nodes[0].Holder("job"); held {
				t.Fatalf("%d: job still held after its release", i)
			}
		}
	}
}

// An operator revokes one reader of a read-write lock by its token over
// HTTP: the reader's lease ends ("revoked"), the other reader keeps its
// grant, and once that one is revoked too the queued writer is granted.
// Revoking without a token a lock that several readers share names no
// grant: 400, and nothing changes. Before, a shared grant could not be
// revoked: 409 not_held, and the writer kept waiting.
func TestRevokeSharedGrantOverHTTP(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := startCluster(t, 3)
		li := c.WaitLeader(time.Second)
		api := newAuthAPI(t, c.Nodes[c.Follower(li)], testAuth)
		ctx := context.Background()
		readers, err := lockapi.NewSession(ctx, c.Nodes[li], lockapi.WithTTL(5*time.Second), lockapi.WithOwner("report-3"))
		if err != nil {
			t.Fatal(err)
		}
		defer readers.Close(ctx)
		r1, err := readers.RLock(ctx, "ledger")
		if err != nil {
			t.Fatal(err)
		}
		r2, err := readers.RLock(ctx, "ledger")
		if err != nil {
			t.Fatal(err)
		}
		writer, err := lockapi.NewSession(ctx, c.Nodes[li], lockapi.WithTTL(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		defer writer.Close(ctx)
		next := make(chan *lockapi.Lease, 1)
		go func() {
			l, err := writer.Lock(ctx, "ledger")
			if err != nil {
				t.Error(err)
			}
			next <- l
		}()
		synctest.Wait()
		if a := serveAs(api, adminSecret, "POST", "/v1/admin/revoke", `{"lock":"ledger","why":"which one?"}`); a.code != http.StatusBadRequest ||
			!strings.Contains(string(a.raw), "token") {
			t.Fatalf("revoke of a shared lock without a token: HTTP %d %s", a.code, a.raw)
		}
		for _, l := range []*lockapi.Lease{r1, r2} {
			a := serveAs(api, adminSecret, "POST", "/v1/admin/revoke", fmt.Sprintf(`{"lock":"ledger","token":%d,"why":"report stuck"}`, l.Token()))
			var rv RevokeResponse
			json.Unmarshal(a.raw, &rv)
			if a.code != http.StatusOK || rv.Kind != "read" || rv.Holder.Token != uint64(l.Token()) || rv.Holder.Description != "report-3" {
				t.Fatalf("revoke of reader %d: HTTP %d %s", l.Token(), a.code, a.raw)
			}
			select {
			case <-l.Done():
			case <-time.After(5 * time.Second):
				t.Fatal("the revoked read lease did not end")
			}
			if err := l.Err(); !errors.Is(err, lockapi.ErrLeaseLost) || !strings.Contains(err.Error(), "revoked") {
				t.Fatalf("read lease error %v", err)
			}
			if l == r1 && r2.Err() != nil {
				t.Fatalf("the other reader's lease ended: %v", r2.Err())
			}
		}
		select {
		case l := <-next:
			if l == nil || l.Token() <= r2.Token() {
				t.Fatalf("the writer's grant %v", l)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the writer still waits after both readers were revoked")
		}
	})
}
