package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/raftlock/raftlock/admin"
)

// A waiting acquire refused by the server's HTTP quotas (its long polls are
// counted per principal: many raftlock processes sharing one token share
// them) asks again until -wait passes; -try gives up at once.
func TestWaitingAcquireRetriesAQuotaRefusal(t *testing.T) {
	defer func(d time.Duration) { quotaRetry = d }(quotaRetry)
	quotaRetry = time.Millisecond
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) <= 3 {
			w.WriteHeader(http.StatusTooManyRequests)
			json.NewEncoder(w).Encode(admin.ErrorJSON{Error: admin.ErrKindClientQuota, Detail: "client token:worker has 64 waiting calls in progress (limit 64)"})
			return
		}
		json.NewEncoder(w).Encode(admin.AcquireResponse{Lock: "job", Token: 9, Handle: "h"})
	}))
	defer srv.Close()
	c, err := newClient(globals{addr: srv.URL, timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	e := &env{c: c, g: globals{timeout: 10 * time.Second}}
	got, err := e.acquire(context.Background(), lockOpts{name: "job", ttl: durationFlag{d: 10 * time.Second}, wait: durationFlag{d: time.Minute}})
	if err != nil || got.Token != 9 || calls.Load() != 4 {
		t.Errorf("waiting acquire: %+v %v after %d calls, want token 9 after 4", got, err, calls.Load())
	}
	calls.Store(0)
	if _, err := e.acquire(context.Background(), lockOpts{name: "job", ttl: durationFlag{d: 10 * time.Second}, try: true}); kindOf(err) != admin.ErrKindClientQuota || calls.Load() != 1 {
		t.Errorf("-try: %v after %d calls, want client_quota after 1", err, calls.Load())
	}
}
