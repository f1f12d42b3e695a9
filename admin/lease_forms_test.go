package admin

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/lockinfo"
)

// acquireJSON posts an acquire and decodes a 200's body.
func acquireJSON(api *Server, client, body string) (answer, AcquireResponse) {
	a := serve(api, client, "POST", "/v1/acquire", body)
	var ar AcquireResponse
	if a.code == http.StatusOK {
		json.Unmarshal(a.raw, &ar)
	}
	return a, ar
}

func leaseOf(api *Server, handle string) LeaseJSON {
	var lj LeaseJSON
	json.Unmarshal(serve(api, "192.0.2.9:1", "GET", "/v1/lease?handle="+handle, "").raw, &lj)
	return lj
}

// heldBy reports whether lock is held with token on the node.
func heldBy(api *Server, lock string, token uint64) bool {
	li, ok := api.n.Lock(lock)
	return ok && li.Held && li.Holder.Token == lockinfo.Token(token)
}

// An acquire that says nothing about its lease gets a client-kept one: a
// session of its own with the server's TTL, held while its client asks
// about it and released once it stops asking (a crashed client: the lock
// used to stay in the replica's shared session for as long as the replica
// lived). "session":"replica" is the explicit form of that: held without
// renewal; it takes no ttl_ms or owner, and other values are refused.
func TestHTTPLeaseIsClientKeptByDefault(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, api := startAPI(t) // TTL 1 s
		const client = "192.0.2.1:1000"
		a, crashed := acquireJSON(api, client, `{"lock":"invoice:842","wait":false}`)
		if a.code != http.StatusOK || crashed.TTLMS != 1000 {
			t.Fatalf("default acquire: HTTP %d %s, want 200 with ttl_ms 1000 (the server's TTL)", a.code, a.raw)
		}
		_, renewed := acquireJSON(api, client, `{"lock":"renewed","wait":false}`)
		_, replica := acquireJSON(api, client, `{"lock":"report","session":"replica"}`)
		shared := api.sess.Info().ID
		if crashed.Session == shared || renewed.Session == crashed.Session || replica.Session != shared || replica.Token == 0 {
			t.Fatalf("sessions: default %d and %d, replica %d; the replica's %d", crashed.Session, renewed.Session, replica.Session, shared)
		}
		// Five TTLs: one lease asked about every TTL/3, the others not.
		for range 15 {
			time.Sleep(333 * time.Millisecond)
			if lj := leaseOf(api, renewed.Handle); !lj.Valid {
				t.Fatalf("a renewed lease ended: %+v", lj)
			}
		}
		synctest.Wait()
		if heldBy(api, "invoice:842", crashed.Token) || leaseOf(api, crashed.Handle).Valid {
			t.Errorf("a default lease nobody asked about for 5 TTLs is still held")
		}
		if !heldBy(api, "renewed", renewed.Token) {
			t.Errorf("the renewed lease's lock is not held")
		}
		if !heldBy(api, "report", replica.Token) || !leaseOf(api, replica.Handle).Valid {
			t.Errorf(`the "session":"replica" lease is not held without renewal`)
		}

		for _, body := range []string{
			`{"lock":"x","session":"replica","ttl_ms":5000}`,
			`{"lock":"x","session":"replica","owner":"job 7"}`,
			`{"lock":"x","session":"shared"}`,
			`{"lock":"x","ttl_ms":9223372036854775807}`,
		} {
			if a := serve(api, client, "POST", "/v1/acquire", body); a.code != http.StatusBadRequest || a.body.Error != ErrKindBadRequest {
				t.Errorf("%s: HTTP %d %s, want 400", body, a.code, a.raw)
			}
		}
		if a, ar := acquireJSON(api, client, `{"lock":"explicit","session":"client","ttl_ms":2000}`); a.code != http.StatusOK || ar.TTLMS != 2000 || ar.Session == shared {
			t.Errorf(`"session":"client": HTTP %d %s`, a.code, a.raw)
		}
		for _, h := range []string{renewed.Handle, replica.Handle} {
			serve(api, client, "POST", "/v1/release", `{"handle":"`+h+`"}`)
		}
	})
}

// A client keeps its client-kept lease by long polling /v1/lease/wait in a
// loop, with the default wait (30 s) far above the TTL: for such a lease a
// wait answers within half its TTL, and the answer renews it (the wait used
// to run its 30 s while the lease lapsed after one TTL).
func TestLeaseWaitLoopKeepsClientKeptLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, api := startAPI(t)
		const client = "192.0.2.1:1000"
		a, ar := acquireJSON(api, client, `{"lock":"polled","ttl_ms":1000}`)
		if a.code != http.StatusOK {
			t.Fatalf("acquire: HTTP %d %s", a.code, a.raw)
		}
		for end := time.Now().Add(5 * time.Second); time.Now().Before(end); {
			start := time.Now()
			w := serve(api, client, "GET", "/v1/lease/wait?handle="+ar.Handle, "")
			var lj LeaseJSON
			json.Unmarshal(w.raw, &lj)
			if w.code != http.StatusOK || !lj.Valid {
				t.Fatalf("lease wait after %v: HTTP %d %s", time.Since(start), w.code, w.raw)
			}
			if took := time.Since(start); took > 500*time.Millisecond {
				t.Fatalf("lease wait answered after %v, want within TTL/2", took)
			}
		}
		if !heldBy(api, "polled", ar.Token) {
			t.Errorf("the lock is not held after 5 TTLs of lease waits")
		}
		serve(api, client, "POST", "/v1/release", `{"handle":"`+ar.Handle+`"}`)
	})
}

// Clients of the replica's shared session contend as before although the
// session never waits for its own grant (lockapi.ErrAlreadyHeld): a try of
// a name it holds for another client is 409 locked naming that holder, a
// waiting acquire waits at the replica (504 when its time is up) and is
// granted once the other client releases.
func TestReplicaSessionClientsWaitForEachOther(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, api := startAPI(t)
		const a, b = "192.0.2.1:1000", "192.0.2.2:1000"
		ans, first := acquireJSON(api, a, `{"lock":"x","session":"replica"}`)
		if ans.code != http.StatusOK {
			t.Fatalf("first: HTTP %d %s", ans.code, ans.raw)
		}
		try := serve(api, b, "POST", "/v1/acquire", `{"lock":"x","session":"replica"}`)
		if try.code != http.StatusConflict || try.body.Error != ErrKindLocked || try.body.Holder == nil || try.body.Holder.Token != first.Token {
			t.Errorf("try: HTTP %d %s, want 409 locked naming the holder", try.code, try.raw)
		}
		if w := serve(api, b, "POST", "/v1/acquire", `{"lock":"x","session":"replica","wait":true,"timeout_ms":500}`); w.code != http.StatusGatewayTimeout || w.body.Error != ErrKindTimeout {
			t.Errorf("bounded wait: HTTP %d %s, want 504 timeout", w.code, w.raw)
		}
		waiter := serveAsync(api, b, "POST", "/v1/acquire", `{"lock":"x","session":"replica","wait":true,"timeout_ms":60000}`)
		time.Sleep(5 * time.Second)
		synctest.Wait()
		select {
		case w := <-waiter:
			t.Fatalf("the waiter answered while the lock was held: HTTP %d %s", w.code, w.raw)
		default:
		}
		serve(api, a, "POST", "/v1/release", `{"handle":"`+first.Handle+`"}`)
		w := <-waiter
		var second AcquireResponse
		json.Unmarshal(w.raw, &second)
		if w.code != http.StatusOK || second.Token <= first.Token {
			t.Fatalf("waiter after the release: HTTP %d %s", w.code, w.raw)
		}
		serve(api, b, "POST", "/v1/release", `{"handle":"`+second.Handle+`"}`)
	})
}

// "shared": true takes a read lock: readers share it (also two in the
// replica's session), a writer's try is refused, a waiting writer is
// granted once the readers are gone; a read semaphore is refused.
func TestReadLocksOverHTTP(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, api := startAPI(t)
		for c.Nodes[0].Status().ClusterVersion < fsm.MaxClusterVersion {
			time.Sleep(10 * time.Millisecond)
		}
		const a, b = "192.0.2.1:1000", "192.0.2.2:1000"
		var handles []string
		for _, body := range []string{
			`{"lock":"doc","shared":true,"ttl_ms":60000}`,
			`{"lock":"doc","shared":true,"ttl_ms":60000}`,
			`{"lock":"doc","shared":true,"session":"replica"}`,
			`{"lock":"doc","shared":true,"session":"replica"}`,
		} {
			ans, ar := acquireJSON(api, a, body)
			if ans.code != http.StatusOK {
				t.Fatalf("reader %s: HTTP %d %s", body, ans.code, ans.raw)
			}
			handles = append(handles, ar.Handle)
		}
		if li, _ := c.Nodes[0].Lock("doc"); li.Held || len(li.Shared) != 4 {
			t.Fatalf("doc: %+v, want 4 readers", li)
		}
		if w := serve(api, b, "POST", "/v1/acquire", `{"lock":"doc"}`); w.code != http.StatusConflict || w.body.Error != ErrKindLocked {
			t.Errorf("writer's try: HTTP %d %s, want 409 locked", w.code, w.raw)
		}
		if a := serve(api, b, "POST", "/v1/acquire", `{"lock":"pool","shared":true,"limit":2}`); a.code != http.StatusBadRequest || !strings.Contains(a.body.Detail, "not both") {
			t.Errorf("a shared semaphore: HTTP %d %s, want 400", a.code, a.raw)
		}
		writer := serveAsync(api, b, "POST", "/v1/acquire", `{"lock":"doc","wait":true,"timeout_ms":60000}`)
		synctest.Wait()
		for _, h := range handles {
			if r := serve(api, a, "POST", "/v1/release", `{"handle":"`+h+`"}`); r.code != http.StatusOK {
				t.Fatalf("release a reader: HTTP %d %s", r.code, r.raw)
			}
		}
		w := <-writer
		var ar AcquireResponse
		json.Unmarshal(w.raw, &ar)
		if w.code != http.StatusOK || !heldBy(api, "doc", ar.Token) {
			t.Fatalf("writer: HTTP %d %s", w.code, w.raw)
		}
		serve(api, b, "POST", "/v1/release", `{"handle":"`+ar.Handle+`"}`)
	})
}
