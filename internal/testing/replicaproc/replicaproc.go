//go:build linux

// Package replicaproc runs clusters of examples/replica processes for tests
// (the raftlock command's, the status page's browser test): it builds the
// replica once per test binary, starts replicas on free loopback ports with
// a bearer token, waits until they form a ready cluster, and pauses or
// kills them. Test machinery: every process is killed when the test ends,
// and by the kernel if the test binary dies.
package replicaproc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/raftlock/raftlock/internal/testing/ports"
	"github.com/raftlock/raftlock/internal/testing/procstop"
)

// Token is the admin bearer token of the replicas Start starts.
const Token = "replicaproc-test-token-0123456789"

var (
	buildOnce sync.Once
	bin       string
	buildErr  error
)

// Build builds examples/replica (once per process) and returns the binary.
func Build(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() { bin, buildErr = build() })
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return bin
}

func build() (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "replicaproc")
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, "replica")
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(gobin); err != nil {
		gobin = "go"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, gobin, "build", "-o", out, "./examples/replica")
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./examples/replica: %v: %s", err, b)
	}
	return out, nil
}

// moduleRoot finds the raftlock module's directory above the working
// directory (a nested module's tests run below it).
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.HasPrefix(string(b), "module github.com/raftlock/raftlock\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("replicaproc: no raftlock go.mod above the working directory")
		}
		dir = parent
	}
}

// Replica is one replica process.
type Replica struct {
	ID   string
	HTTP string // host:port of its admin API
	cmd  *exec.Cmd
	done chan struct{}
	log  *Buffer
}

// Signal sends sig to the process unless it has exited.
func (r *Replica) Signal(sig syscall.Signal) {
	select {
	case <-r.done:
	default:
		r.cmd.Process.Signal(sig)
	}
}

// Freeze SIGSTOPs the replica and waits until it has stopped.
func (r *Replica) Freeze(t testing.TB) {
	t.Helper()
	r.Signal(syscall.SIGSTOP)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := procstop.Wait(ctx, r.cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
}

// Kill SIGKILLs the replica and waits for its exit.
func (r *Replica) Kill() {
	r.Signal(syscall.SIGCONT)
	r.Signal(syscall.SIGKILL)
	<-r.done
}

// Exited reports whether the process has exited.
func (r *Replica) Exited() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// Log returns what the process wrote so far.
func (r *Replica) Log() string { return r.log.String() }

// Buffer is a bytes.Buffer safe for concurrent writers and readers (a
// process's output read while it runs).
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what was written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Start starts n replicas (-timing test, -bootstrap-expect n, admin token
// Token, extra flags appended) and waits until every one is ready with the
// same leader and n servers.
func Start(t testing.TB, n int, extra ...string) []*Replica {
	t.Helper()
	return StartHost(t, "127.0.0.1", n, extra...)
}

// StartHost is Start with every address given to the replicas (-bind,
// -gossip, -join, and for a name -advertise) as host:port: a name (such
// as localhost) tests the path of DNS names. The HTTP addresses stay
// loopback IPs.
func StartHost(t testing.TB, host string, n int, extra ...string) []*Replica {
	t.Helper()
	exe := Build(t)
	addrs, err := ports.Free(3 * n)
	if err != nil {
		t.Fatal(err)
	}
	for i := range addrs {
		if i%3 != 2 {
			addrs[i] = strings.Replace(addrs[i], "127.0.0.1:", host+":", 1)
		}
	}
	var gossip []string
	for i := range n {
		gossip = append(gossip, addrs[3*i+1])
	}
	var reps []*Replica
	for i := range n {
		id := fmt.Sprintf("r%d", i+1)
		r := &Replica{ID: id, HTTP: addrs[3*i+2], done: make(chan struct{}), log: &Buffer{}}
		args := append([]string{"-id", id, "-data-dir", filepath.Join(t.TempDir(), id), "-bind", addrs[3*i], "-gossip", gossip[i],
			"-join", strings.Join(gossip, ","), "-bootstrap-expect", fmt.Sprint(n), "-http", r.HTTP, "-timing", "test"}, extra...)
		if net.ParseIP(host) == nil {
			args = append(args, "-advertise", addrs[3*i]) // peers dial the name
		}
		r.cmd = exec.Command(exe, args...)
		r.cmd.Env = append(os.Environ(), "RAFTLOCK_ADMIN_TOKEN="+Token)
		r.cmd.Stdout, r.cmd.Stderr = r.log, r.log
		r.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := r.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { r.cmd.Wait(); close(r.done) }()
		t.Cleanup(func() {
			r.Kill()
			if t.Failed() {
				t.Logf("--- log of %s ---\n%s", r.ID, r.Log())
			}
		})
		reps = append(reps, r)
	}
	hc := &http.Client{Timeout: 2 * time.Second}
	defer hc.CloseIdleConnections()
	WaitFor(t, 60*time.Second, "a ready cluster", func() bool {
		leader := ""
		for _, r := range reps {
			if r.Exited() {
				t.Fatalf("%s exited:\n%s", r.ID, r.Log())
			}
			st, err := status(hc, r)
			if err != nil || !st.Ready || st.LeaderID == "" || (leader != "" && st.LeaderID != leader) || len(st.Servers) != n {
				return false
			}
			leader = st.LeaderID
		}
		return true
	})
	return reps
}

// Leader returns the replica the others follow (fails the test if they do
// not agree).
func Leader(t testing.TB, reps []*Replica) *Replica {
	t.Helper()
	hc := &http.Client{Timeout: 2 * time.Second}
	defer hc.CloseIdleConnections()
	var leader *Replica
	WaitFor(t, 30*time.Second, "an agreed leader", func() bool {
		id := ""
		for _, r := range reps {
			if r.Exited() {
				continue
			}
			st, err := status(hc, r)
			if err != nil || st.LeaderID == "" || (id != "" && st.LeaderID != id) {
				return false
			}
			id = st.LeaderID
		}
		for _, r := range reps {
			if r.ID == id {
				leader = r
			}
		}
		return leader != nil
	})
	return leader
}

type statusJSON struct {
	Ready    bool       `json:"ready"`
	LeaderID string     `json:"leader_id"`
	Servers  []struct{} `json:"servers"`
}

func status(hc *http.Client, r *Replica) (statusJSON, error) {
	var st statusJSON
	req, _ := http.NewRequest("GET", "http://"+r.HTTP+"/v1/status", nil)
	req.Header.Set("Authorization", "Bearer "+Token)
	resp, err := hc.Do(req)
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

// WaitFor polls cond every 50 ms until it holds, or fails the test after
// timeout.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
