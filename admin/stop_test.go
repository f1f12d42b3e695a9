package admin

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raftlock/raftlock/internal/testing/clustertest"
)

// acquireVia acquires lock through api (body: the acquire's extra fields)
// and returns the answer and the end of the window it reported.
func acquireVia(t *testing.T, api *Server, client, lock, extra string) (AcquireResponse, time.Time) {
	t.Helper()
	sent := time.Now()
	a := serve(api, client, "POST", "/v1/acquire", `{"lock":"`+lock+`"`+extra+`}`)
	var ar AcquireResponse
	json.Unmarshal(a.raw, &ar)
	if a.code != http.StatusOK || ar.ValidForMS <= 0 {
		t.Fatalf("acquire %s: HTTP %d %s", lock, a.code, a.raw)
	}
	end := sent.Add(time.Duration(ar.ValidForMS) * time.Millisecond)
	if until := time.UnixMilli(ar.ValidUntilUnixMS); until.After(end) {
		end = until
	}
	return ar, end
}

// askedUntil asks api about the lease of handle and returns the end of the
// window it reported, or end if that is later.
func askedUntil(t *testing.T, api *Server, handle string, end time.Time) time.Time {
	t.Helper()
	sent := time.Now()
	var lj LeaseJSON
	json.Unmarshal(serve(api, "10.0.0.1:1", "GET", "/v1/lease?handle="+handle, "").raw, &lj)
	if !lj.Valid {
		t.Fatalf("lease %s: %+v", handle, lj)
	}
	if e := sent.Add(time.Duration(lj.ValidForMS) * time.Millisecond); e.After(end) {
		return e
	}
	return end
}

// grantedAt acquires lock through api, waiting, and returns when the grant
// came.
func grantedAt(api *Server, client, lock string) <-chan time.Time {
	ch := make(chan time.Time, 1)
	go func() {
		a := serve(api, client, "POST", "/v1/acquire", `{"lock":"`+lock+`","wait":true,"timeout_ms":60000}`)
		if a.code != http.StatusOK {
			close(ch)
			return
		}
		ch <- time.Now()
	}()
	return ch
}

// twoReplicas starts a 3-node cluster and API servers on two of its nodes:
// the one a test stops, and another.
func twoReplicas(t *testing.T) (c *clustertest.Cluster, stopping, other *Server) {
	t.Helper()
	c = startCluster(t, 3)
	return c, newAPI(t, c.Nodes[0], testLimits{}), newAPI(t, c.Nodes[1], testLimits{})
}

// A replica's graceful stop releases what its HTTP clients hold only once
// the window it reported to them has ended: another replica's client is not
// granted the lock inside it. Before, Close released everything at once
// (the multi-process upgrade class caught it: the session close released a
// lock 20 ms before the window the stopping replica had reported, and
// another replica granted it inside that window).
func TestStopKeepsReportedWindows(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, stopping, other := twoReplicas(t)
		defer closeAPI(t, other)

		shared, sharedEnd := acquireVia(t, stopping, "10.0.0.1:1", "shared", "")
		kept, keptEnd := acquireVia(t, stopping, "10.0.0.1:1", "kept", `,"ttl_ms":1500`)
		// A keepalive later, asking about a lease reports a later window.
		time.Sleep(500 * time.Millisecond)
		sharedEnd = askedUntil(t, stopping, shared.Handle, sharedEnd)
		keptEnd = askedUntil(t, stopping, kept.Handle, keptEnd)
		waiters := map[string]<-chan time.Time{
			"shared": grantedAt(other, "10.0.0.2:1", "shared"),
			"kept":   grantedAt(other, "10.0.0.2:1", "kept"),
		}
		ends := map[string]time.Time{"shared": sharedEnd, "kept": keptEnd}
		synctest.Wait()

		closed := make(chan error, 1)
		start := time.Now()
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			closed <- stopping.Close(ctx)
		}()
		synctest.Wait()
		// While it stops, the replica promises nothing more.
		for lock, h := range map[string]string{"shared": shared.Handle, "kept": kept.Handle} {
			var lj LeaseJSON
			json.Unmarshal(serve(stopping, "10.0.0.1:1", "GET", "/v1/lease?handle="+h, "").raw, &lj)
			if lj.ValidForMS != 0 {
				t.Errorf("%s: a stopping replica reported %d ms more", lock, lj.ValidForMS)
			}
		}
		for lock, ch := range waiters {
			at, ok := <-ch
			if !ok {
				t.Fatalf("%s: the other replica's acquire failed", lock)
			}
			if at.Before(ends[lock]) {
				t.Errorf("%s: granted through another replica %v after the stop began, %v before the window the stopping replica reported had ended",
					lock, at.Sub(start), ends[lock].Sub(at))
			}
		}
		if err := <-closed; err != nil {
			t.Fatalf("close: %v", err)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("the stop took %v: longer than the windows it waited for", d)
		}
	})
}

// A stop whose ctx ends before a reported window does not release that
// lease: Close says so, and the lock stays held until the leader expires
// the session once the node is closed (after the window).
func TestStopShorterThanAWindowReleasesNothingEarly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, stopping, other := twoReplicas(t)
		defer closeAPI(t, other)

		_, end := acquireVia(t, stopping, "10.0.0.1:1", "x", "")
		waiter := grantedAt(other, "10.0.0.2:1", "x")
		synctest.Wait()

		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		err := stopping.Close(ctx)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("close with a ctx shorter than the window: %v, want it to say the deadline passed", err)
		}
		if _, held := c.Nodes[1].Holder("x"); !held {
			t.Fatal("the lease was released although its window had not ended")
		}
		c.Stop(0)
		at, ok := <-waiter
		if !ok {
			t.Fatal("the other replica's acquire failed")
		}
		if at.Before(end) {
			t.Errorf("granted %v before the reported window ended", end.Sub(at))
		}
	})
}
