//go:build linux

package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/raftlock/raftlock/admin"
)

// fakeReplica is an admin API for one lease that the tests can freeze
// (every request then hangs until its client gives up, as through a
// SIGSTOPped replica) or cut from its quorum (the lease answers stay valid
// but stop moving: the session's keepalives fail; the status says no
// quorum, as admin's does).
type fakeReplica struct {
	ttl      time.Duration
	frozen   atomic.Bool
	noQuorum atomic.Bool
	released atomic.Int32 // release requests answered
	hung     atomic.Int32 // requests that hung until their client gave up
	closed   chan struct{}

	mu       sync.Mutex
	until    time.Time // the session's validity once the quorum is lost
	acquired admin.AcquireRequest
}

func (f *fakeReplica) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if f.frozen.Load() {
		// Read the body first: only then does net/http notice that the
		// client gave up (and cancel r.Context).
		io.Copy(io.Discard, r.Body)
		select {
		case <-r.Context().Done():
			f.hung.Add(1)
		case <-f.closed:
		}
		return
	}
	switch r.URL.Path {
	case "/v1/acquire":
		f.mu.Lock()
		json.NewDecoder(r.Body).Decode(&f.acquired)
		f.mu.Unlock()
		json.NewEncoder(w).Encode(admin.AcquireResponse{Lock: "job", Token: 7, Handle: "h", ValidForMS: f.ttl.Milliseconds() * 9 / 10, TTLMS: f.ttl.Milliseconds()})
	case "/v1/lease":
		valid := f.ttl * 9 / 10
		if f.noQuorum.Load() {
			f.mu.Lock()
			if f.until.IsZero() {
				f.until = time.Now().Add(valid)
			}
			valid = max(time.Until(f.until), 0)
			f.mu.Unlock()
		}
		json.NewEncoder(w).Encode(admin.LeaseJSON{Valid: true, Lock: "job", Token: 7, Handle: "h", ValidForMS: valid.Milliseconds()})
	case "/v1/lease/wait":
		ms, _ := strconv.Atoi(r.URL.Query().Get("timeout_ms"))
		select {
		case <-r.Context().Done():
		case <-time.After(time.Duration(ms) * time.Millisecond):
			json.NewEncoder(w).Encode(admin.LeaseJSON{Valid: true, Lock: "job", Token: 7, Handle: "h"})
		}
	case "/v1/release":
		f.released.Add(1)
		w.Write([]byte("{}"))
	case "/v1/status":
		st := admin.StatusJSON{ID: "r1", State: "follower", Health: admin.HealthJSON{Ready: true, Voters: 3, VotersUp: 3, Quorum: 2, Tolerates: 1,
			FaultTolerance: "3 of 3 voters up: survives one more failure"}}
		if f.noQuorum.Load() {
			st.Health = admin.HealthJSON{Reasons: []string{"no leader known (election in progress, or no quorum)"}, Voters: 3, VotersUp: 1, Quorum: 2, Tolerates: -1,
				FaultTolerance: "1 of 3 voters up: no quorum — no lock is granted or renewed until 1 more come back"}
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		json.NewEncoder(w).Encode(st)
	default:
		http.NotFound(w, r)
	}
}

func startFake(t *testing.T, ttl time.Duration) (*fakeReplica, string) {
	f := &fakeReplica{ttl: ttl, closed: make(chan struct{})}
	srv := httptest.NewServer(f)
	t.Cleanup(func() {
		close(f.closed)
		srv.Close()
	})
	return f, srv.URL
}

// The lease of raftlock lock cannot be renewed: the command is signalled
// (SIGTERM, then SIGKILL before the lease could end), and raftlock then
// exits at once, saying why — through a frozen replica it does not wait
// out a release (-timeout, 60 s here: it waited up to the request timeout,
// 15 s by default, ~12.8 s measured), and when the replica answers that it
// has no quorum it says "no quorum", not "the replica did not answer".
func TestLockExitsPromptlyOnLeaseLoss(t *testing.T) {
	exe := self(t)
	for _, tc := range []struct {
		name  string
		cut   func(f *fakeReplica)
		cause string
	}{
		{"frozen replica", func(f *fakeReplica) { f.frozen.Store(true) }, "not renewed in time: the replica did not answer ("},
		{"no quorum", func(f *fakeReplica) { f.noQuorum.Store(true) }, "not renewed in time: no quorum (1 of 3 voters up"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, addr := startFake(t, 2*time.Second)
			file := filepath.Join(t.TempDir(), "held")
			b := &bg{done: make(chan struct{})}
			go func() {
				_, b.stderr, b.code = runLocal(addr, "", "-timeout", "60s", "lock", "-ttl", "2s", "job", "--", exe, "hold", file, "ignore-term")
				close(b.done)
			}()
			waitFor(t, 20*time.Second, "the command under the lock to start", func() bool { return exists(file + ".started") })
			tc.cut(f)
			cut := time.Now()
			code, errOut := b.wait(t, 20*time.Second) // < -timeout: no request timeout is waited out
			t.Logf("%s: raftlock exited %v after the cut (TTL 2s): %s", tc.name, time.Since(cut).Round(time.Millisecond), errOut)
			if code != exitLeaseLost || !strings.Contains(errOut, "SIGTERM sent") || !strings.Contains(errOut, "SIGKILL sent") || !strings.Contains(errOut, tc.cause) {
				t.Errorf("exit %d (want %d), stderr %q: want SIGTERM, SIGKILL and the cause %q", code, exitLeaseLost, errOut, tc.cause)
			}
			if !exists(file + ".term") {
				t.Error("the command never saw SIGTERM")
			}
		})
	}
}

// The command cannot be started: exit 127 (as a shell), the lock
// released, one message. -lock-delay is sent as the lease's lock-delay.
func TestLockCommandNotStarted(t *testing.T) {
	f, addr := startFake(t, 10*time.Second)
	missing := filepath.Join(t.TempDir(), "no-such-command")
	_, errOut, code := runLocal(addr, "", "lock", "-lock-delay", "2.5s", "job", "--", missing, "arg")
	want := "raftlock lock: cannot start " + missing + ": fork/exec " + missing + ": no such file or directory (job was released)\n"
	if code != exitNoCommand || errOut != want {
		t.Errorf("exit %d, stderr %q; want %d and %q", code, errOut, exitNoCommand, want)
	}
	if f.released.Load() != 1 {
		t.Errorf("%d releases, want 1", f.released.Load())
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.acquired.LockDelayMS != 2500 || f.acquired.TTLMS != 10000 {
		t.Errorf("acquired with %+v, want lock_delay_ms 2500 and ttl_ms 10000", f.acquired)
	}
}
