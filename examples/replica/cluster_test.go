//go:build linux

package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/raftlock/raftlock/admin"
	"github.com/raftlock/raftlock/internal/testing/ports"
	"github.com/raftlock/raftlock/internal/testing/procstop"
	"github.com/raftlock/raftlock/node"
)

// replicaProc is one replica process: the test binary re-executed as the
// replica program (TestMain), in its own process group, killed by the
// kernel if the test dies and by t.Cleanup otherwise.
type replicaProc struct {
	t    *testing.T
	id   string
	http string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
	log  *bytes.Buffer
}

// replicaCommand is the replica program (the test binary re-executed, see
// TestMain) with args and exactly the RAFTLOCK_* variables of env.
func replicaCommand(t *testing.T, args []string, env map[string]string) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(args)
	cmd := exec.Command(exe)
	for _, kv := range os.Environ() { // the replica's settings are the test's alone
		if !strings.HasPrefix(kv, "RAFTLOCK_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, replicaArgsEnv+"="+string(a))
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	return cmd
}

// runReplicaCommand runs a replica subcommand (such as certs) in dir to its
// end (at most a minute) and returns its output; it fails the test unless
// the command exits 0.
func runReplicaCommand(t *testing.T, dir string, args []string, env map[string]string) string {
	t.Helper()
	cmd := replicaCommand(t, args, env)
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.WaitDelay = time.Second
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-done:
		case <-time.After(time.Minute):
			cmd.Process.Kill()
		}
	}()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("replica %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func startReplica(t *testing.T, id string, args []string, env map[string]string) *replicaProc {
	t.Helper()
	cmd := replicaCommand(t, args, env)
	p := &replicaProc{t: t, id: id, cmd: cmd, done: make(chan struct{}), log: &bytes.Buffer{}}
	cmd.Stdout, cmd.Stderr = &lockedWriter{w: p.log}, &lockedWriter{w: p.log}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.signal(syscall.SIGCONT)
		p.signal(syscall.SIGKILL)
		<-p.done
		if t.Failed() {
			t.Logf("--- log of %s ---\n%s", id, p.logText())
		}
	})
	return p
}

// kill SIGKILLs the process and waits for its exit.
func (p *replicaProc) kill() {
	p.signal(syscall.SIGCONT)
	p.signal(syscall.SIGKILL)
	<-p.done
}

func (p *replicaProc) signal(sig syscall.Signal) {
	select {
	case <-p.done:
	default:
		syscall.Kill(-p.cmd.Process.Pid, sig)
	}
}

// freeze SIGSTOPs the process and waits until it has stopped.
func (p *replicaProc) freeze() {
	p.t.Helper()
	p.signal(syscall.SIGSTOP)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := procstop.Wait(ctx, p.cmd.Process.Pid); err != nil {
		p.t.Fatal(err)
	}
}

func (p *replicaProc) logText() string {
	lw := p.cmd.Stderr.(*lockedWriter)
	lw.mu.Lock()
	defer lw.mu.Unlock()
	return p.log.String()
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

func freePorts(t *testing.T, n int) []string {
	t.Helper()
	addrs, err := ports.Free(n)
	if err != nil {
		t.Fatal(err)
	}
	return addrs
}

// testAdminToken is the replicas' admin bearer token in the tests.
const testAdminToken = "test-admin-token"

// bearer adds a bearer token to every request.
type bearer struct {
	rt    http.RoundTripper
	token string
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.rt.RoundTrip(r)
}

// api is a small JSON client of one replica.
type api struct {
	t    *testing.T
	base string
	hc   *http.Client
}

func (a api) do(method, path string, body any, out any) int {
	a.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, method, a.base+path, rd)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := a.hc.Do(req)
	if err != nil {
		a.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			a.t.Fatalf("%s %s: HTTP %d, body %q: %v", method, path, resp.StatusCode, b, err)
		}
	}
	return resp.StatusCode
}

func (a api) get(path string) (int, string) {
	a.t.Helper()
	resp, err := a.hc.Get(a.base + path)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (a api) status() (admin.StatusJSON, error) {
	var st admin.StatusJSON
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", a.base+"/v1/status", nil)
	resp, err := a.hc.Do(req)
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

// waitUntil polls cond every 50 ms until it holds or timeout passes.
func waitUntil(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// healthy: every replica is ready, agrees on a leader, and sees three alive
// voters.
func healthy(apis []api) bool { return healthyVoters(apis, 3) }

// healthyVoters: every replica is ready, agrees on a leader, and sees n
// alive voters (n voters configured).
func healthyVoters(apis []api, n int) bool {
	leader := ""
	for _, a := range apis {
		st, err := a.status()
		if err != nil || !st.Ready || st.LeaderID == "" || (leader != "" && st.LeaderID != leader) || st.Session.State != "healthy" {
			return false
		}
		leader = st.LeaderID
		alive, voters := 0, 0
		for _, m := range st.Members {
			if m.State == "alive" && m.Role == "voter" {
				alive++
			}
		}
		for _, s := range st.Servers {
			if s.Role == "voter" {
				voters++
			}
		}
		if alive != n || voters != n {
			return false
		}
	}
	return true
}

// startTLSCluster starts three replica processes with mutual TLS and an
// encrypted gossip — configured through flags, environment variables and
// both — and waits until they form a healthy cluster. taken: a replica could
// not bind a port (another program took it since it was chosen); the others
// have been stopped.
func startTLSCluster(t *testing.T, dir, certs string, hc *http.Client) (procs []*replicaProc, apis []api, gossip []string, taken bool) {
	t.Helper()
	key := make([]byte, 32)
	rand.Read(key)
	gossipKey := base64.StdEncoding.EncodeToString(key)
	ports := freePorts(t, 9)
	raftAddr := func(i int) string { return ports[3*i] }
	gossipAddr := func(i int) string { return ports[3*i+1] }
	httpAddr := func(i int) string { return ports[3*i+2] }
	join := strings.Join([]string{gossipAddr(0), gossipAddr(1), gossipAddr(2)}, ",")
	cert := func(id, kind string) string {
		switch kind {
		case "ca":
			return filepath.Join(certs, "ca.pem")
		case "key":
			return filepath.Join(certs, id+"-key.pem")
		}
		return filepath.Join(certs, id+".pem")
	}
	for i := range 3 {
		id := fmt.Sprintf("r%d", i+1)
		all := map[string]string{
			"id": id, "data-dir": filepath.Join(dir, id), "bind": raftAddr(i), "gossip": gossipAddr(i), "join": join,
			"bootstrap-expect": "3", "http": httpAddr(i), "tls-ca": cert(id, "ca"), "tls-cert": cert(id, "cert"),
			"tls-key": cert(id, "key"), "tls-server-name": "raftlock", "gossip-key": gossipKey, "ttl": "5s", "log-level": "info",
			"admin-token": testAdminToken,
		}
		var args []string
		env := map[string]string{}
		for flag, v := range all {
			switch {
			case i == 0: // r1: environment only
				env[envVars[flag]] = v
			case i == 1: // r2: flags only
				args = append(args, "-"+flag, v)
			case strings.HasPrefix(flag, "tls") || flag == "id": // r3: both
				args = append(args, "-"+flag, v)
			default:
				env[envVars[flag]] = v
			}
		}
		if i == 2 { // a flag wins over its environment variable
			env["RAFTLOCK_HTTP"] = "127.0.0.1:1"
			args = append(args, "-http", httpAddr(i))
		}
		procs = append(procs, startReplica(t, id, args, env))
	}
	for i := range 3 {
		apis = append(apis, api{t: t, base: "http://" + httpAddr(i), hc: hc})
	}
	waitUntil(t, 45*time.Second, "a healthy cluster of three", func() bool {
		for _, p := range procs {
			select {
			case <-p.done:
				if strings.Contains(p.logText(), "address already in use") {
					taken = true
					return true
				}
				t.Fatalf("%s exited: %v", p.id, p.err)
			default:
			}
		}
		return healthy(apis)
	})
	if taken {
		for _, p := range procs {
			p.kill()
		}
	}
	gossip = []string{gossipAddr(0), gossipAddr(1), gossipAddr(2)}
	return procs, apis, gossip, taken
}

// TestReplicaCluster starts three replica processes — with mutual TLS and
// an encrypted gossip, configured through flags, environment variables and
// both — and exercises the HTTP API: acquire, release, holder, waiters,
// leases, status, metrics, the status page, lease loss after a pause,
// quorum loss, and a graceful shutdown.
func TestReplicaCluster(t *testing.T) {
	dir := t.TempDir()
	if err := run(context.Background(), []string{"certs", "-dir", filepath.Join(dir, "certs"), "-names", "r1,r2,r3"}, envOf(nil), io.Discard); err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: bearer{tr, testAdminToken}}
	var procs []*replicaProc
	var apis []api
	var gossip []string
	for attempt := 1; ; attempt++ {
		var taken bool
		procs, apis, gossip, taken = startTLSCluster(t, filepath.Join(dir, fmt.Sprint(attempt)), filepath.Join(dir, "certs"), hc)
		if !taken {
			break
		}
		if attempt == 3 {
			t.Fatal("ports taken by other programs three times in a row")
		}
		t.Logf("a port was taken meanwhile by another program; starting again on other ports")
	}
	r1, r2, r3 := apis[0], apis[1], apis[2]

	// Without the token: 401 (JSON), except the liveness probe.
	anon := api{t: t, base: r1.base, hc: &http.Client{Transport: tr}}
	var e admin.ErrorJSON
	if code := anon.do("GET", "/v1/status", nil, &e); code != 401 || e.Error != "unauthorized" {
		t.Errorf("status without a token: HTTP %d %+v", code, e)
	}
	if code, _ := anon.get("/healthz"); code != 200 {
		t.Errorf("/healthz without a token: HTTP %d", code)
	}

	// Status.
	st, err := r3.status()
	if err != nil {
		t.Fatal(err)
	}
	if st.ID != "r3" || st.Term == 0 || st.CommitIndex == 0 || st.GossipAddr != gossip[2] || st.Session.ID == 0 || st.Session.TTLMS != 5000 {
		t.Errorf("status: %+v", st)
	}

	// Acquire (TryLock) in r1's session — held until released, without
	// renewals — then the same lock from another replica: 409 with the holder.
	var a1 admin.AcquireResponse
	if code := r1.do("POST", "/v1/acquire", map[string]any{"lock": "x", "wait": false, "session": "replica"}, &a1); code != 200 || a1.Token == 0 || a1.Handle == "" || a1.Lock != "x" {
		t.Fatalf("acquire: HTTP %d %+v", code, a1)
	}
	if a1.ValidUntilUnixMS < time.Now().UnixMilli() {
		t.Errorf("valid_until %d in the past", a1.ValidUntilUnixMS)
	}
	if code := r2.do("POST", "/v1/acquire", map[string]any{"lock": "x"}, &e); code != 409 || e.Error != "locked" || e.Holder == nil || e.Holder.Token != a1.Token || e.Holder.Description != "http@r1" {
		t.Errorf("TryLock of a held lock: HTTP %d %+v", code, e)
	}
	// A bounded wait that times out: 504.
	if code := r3.do("POST", "/v1/acquire", map[string]any{"lock": "x", "wait": true, "timeout_ms": 200}, &e); code != 504 || e.Error != "timeout" {
		t.Errorf("timed-out wait: HTTP %d %+v", code, e)
	}
	// Bad input: 400.
	for _, body := range []any{map[string]any{"lock": ""}, map[string]any{"lock": "y", "timeout_ms": -1}, "not an object"} {
		if code := r1.do("POST", "/v1/acquire", body, &e); code != 400 || e.Error != "bad_request" {
			t.Errorf("acquire %v: HTTP %d %+v", body, code, e)
		}
	}

	// The timed-out wait is withdrawn (in the background): nothing stays queued.
	var lj admin.LockJSON
	waitUntil(t, 10*time.Second, "the timed-out waiter to be withdrawn", func() bool {
		r1.do("GET", "/v1/locks/x?sync=1", nil, &lj)
		return len(lj.Waiters) == 0
	})

	// A waiter queues behind the holder; the lock view shows both, from any replica.
	type result struct {
		code int
		resp admin.AcquireResponse
	}
	waited := make(chan result, 1)
	go func() {
		var r admin.AcquireResponse
		code := r2.do("POST", "/v1/acquire", map[string]any{"lock": "x", "wait": true, "timeout_ms": 20000, "session": "replica"}, &r)
		waited <- result{code, r}
	}()
	waitUntil(t, 10*time.Second, "the waiter in the lock's queue", func() bool {
		r3.do("GET", "/v1/locks/x?sync=1", nil, &lj)
		return len(lj.Waiters) == 1
	})
	if !lj.Held || lj.Holder == nil || lj.Holder.Token != a1.Token || lj.Waiters[0].Description != "http@r2" {
		t.Errorf("lock view: %+v", lj)
	}
	var ls struct{ Locks []admin.LockJSON }
	if code := r1.do("GET", "/v1/locks?prefix=x&limit=10", nil, &ls); code != 200 || len(ls.Locks) != 1 || ls.Locks[0].Name != "x" {
		t.Errorf("lock list: HTTP %d %+v", code, ls)
	}
	if code := r1.do("GET", "/v1/locks/free-lock", nil, &lj); code != 200 || lj.Held || len(lj.Waiters) != 0 {
		t.Errorf("free lock: HTTP %d %+v", code, lj)
	}

	// Lease: valid; a long poll that times out says so.
	var lease admin.LeaseJSON
	if code := r1.do("GET", "/v1/lease?handle="+a1.Handle, nil, &lease); code != 200 || !lease.Valid || lease.Token != a1.Token {
		t.Errorf("lease: HTTP %d %+v", code, lease)
	}
	if code := r1.do("GET", "/v1/lease/wait?handle="+a1.Handle+"&timeout_ms=100", nil, &lease); code != 200 || !lease.Valid {
		t.Errorf("lease wait: HTTP %d %+v", code, lease)
	}
	if code := r1.do("GET", "/v1/lease?handle=nope", nil, &e); code != 404 || e.Error != "unknown_handle" {
		t.Errorf("unknown handle: HTTP %d %+v", code, e)
	}

	// Release hands the lock to the waiter, with a higher token.
	var rel map[string]bool
	if code := r1.do("POST", "/v1/release", map[string]string{"handle": a1.Handle}, &rel); code != 200 || !rel["released"] {
		t.Errorf("release: HTTP %d %v", code, rel)
	}
	w := <-waited
	if w.code != 200 || w.resp.Token <= a1.Token {
		t.Fatalf("waiter: HTTP %d %+v (first token %d)", w.code, w.resp, a1.Token)
	}
	if code := r1.do("POST", "/v1/release", map[string]string{"handle": a1.Handle}, &e); code != 404 {
		t.Errorf("second release: HTTP %d %+v", code, e)
	}

	// Metrics and the status page.
	code, body := r2.get("/metrics")
	for _, m := range []string{"raftlock_node_grants_total", "raftlock_client_acquire_duration_seconds", "raftlock_client_waiters", "go_goroutines", "raftlock_raft_"} {
		if code != 200 || !strings.Contains(body, m) {
			t.Errorf("/metrics (HTTP %d) lacks %s", code, m)
		}
	}
	code, body = r3.get("/")
	if code != 200 || !strings.Contains(body, "<title>raftlock</title>") || !strings.Contains(body, `getJSON("v1/status?probe=1"`) || strings.Contains(body, "http://") && strings.Contains(body, "<script src=") {
		t.Errorf("status page: HTTP %d\n%s", code, body)
	}

	// A lease on r3; then r2 and r3 are paused: r1 has no quorum (503) and
	// cannot renew its own session. r2 resumes first: r1 and r2 have a
	// quorum while r3 is still paused, so r3's session expires and its
	// lease is lost. (Resuming both at once would race r3's keepalive with
	// the leader's expiry: a session renewed in time is rightly kept.) Once
	// r3 resumes, releasing the lost lease says not_holder and the cluster
	// recovers.
	var a3 admin.AcquireResponse
	if code := r3.do("POST", "/v1/acquire", map[string]any{"lock": "y", "wait": true, "timeout_ms": 5000}, &a3); code != 200 {
		t.Fatalf("acquire on r3: HTTP %d", code)
	}
	procs[1].freeze()
	procs[2].freeze()
	if code := r1.do("POST", "/v1/acquire", map[string]any{"lock": "z"}, &e); code != 503 || e.Error != "no_quorum" {
		t.Errorf("TryLock without quorum: HTTP %d %+v", code, e)
	}
	// r1's session cannot be renewed either: wait until r1 sees it lost.
	waitUntil(t, 10*time.Second, "r1's session to be lost", func() bool {
		st, err := r1.status()
		return err == nil && st.Session.State == "lost"
	})
	procs[1].signal(syscall.SIGCONT)
	waitUntil(t, 30*time.Second, "r3's session to expire while r3 is paused", func() bool {
		var l admin.LockJSON
		return r1.do("GET", "/v1/locks/y?sync=1", nil, &l) == 200 && !l.Held
	})
	procs[2].signal(syscall.SIGCONT)
	if code := r3.do("GET", "/v1/lease/wait?handle="+a3.Handle+"&timeout_ms=10000", nil, &lease); code != 200 || lease.Valid || lease.Error == "" {
		t.Errorf("lease after the pause: HTTP %d %+v", code, lease)
	}
	if code := r3.do("POST", "/v1/release", map[string]string{"handle": a3.Handle}, &e); code != 409 || e.Error != "not_holder" {
		t.Errorf("release of a lost lease: HTTP %d %+v", code, e)
	}
	waitUntil(t, 30*time.Second, "the cluster to recover", func() bool { return healthy(apis) })
	var a4 admin.AcquireResponse
	if code := r1.do("POST", "/v1/acquire", map[string]any{"lock": "y", "wait": true, "timeout_ms": 10000}, &a4); code != 200 || a4.Token <= w.resp.Token {
		t.Errorf("acquire after recovery: HTTP %d %+v", code, a4)
	}
	st, _ = r1.status()
	if st.Session.Generation < 2 {
		t.Errorf("r1's HTTP session was not replaced after its loss: %+v", st.Session)
	}

	// Graceful shutdown: SIGTERM, exit 0, and the others see it leave.
	procs[0].signal(syscall.SIGTERM)
	select {
	case <-procs[0].done:
		if procs[0].err != nil {
			t.Errorf("r1 exited with %v", procs[0].err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("r1 did not exit within 30s of SIGTERM")
	}
	if !strings.Contains(procs[0].logText(), "shutting down") {
		t.Error("r1's log lacks the shutdown")
	}
	// A stop for a restart: the leader keeps r1 until it has been gone for
	// the reap timeout (30 s by default), counted from when the leader saw
	// it go — which may be a little after r1 exited on a busy machine.
	reap := node.DefaultConfig().ReapTimeout
	waitUntil(t, reap+30*time.Second, "r1 to be reaped from the configuration", func() bool {
		st, err := r2.status()
		if err != nil {
			return false
		}
		for _, s := range st.Servers {
			if s.ID == "r1" {
				return false
			}
		}
		return st.LeaderID != ""
	})
}

// TestReplicaFatal: a fatal configuration error exits non-zero.
func TestReplicaFatal(t *testing.T) {
	p := startReplica(t, "bad", []string{"-id", "x"}, nil) // no data dir
	<-p.done
	if ee, ok := p.err.(*exec.ExitError); !ok || ee.ExitCode() != 2 {
		t.Errorf("exit: %v, want status 2", p.err)
	}
	ports := freePorts(t, 1)
	ln, err := net.Listen("tcp", ports[0])
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	p = startReplica(t, "busy", []string{"-id", "x", "-data-dir", t.TempDir(), "-http", ports[0], "-http-no-auth"}, nil)
	<-p.done
	if ee, ok := p.err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(p.logText(), "address already in use") {
		t.Errorf("busy HTTP port: exit %v, log %q", p.err, p.logText())
	}
}
