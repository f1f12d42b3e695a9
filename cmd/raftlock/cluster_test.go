//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/raftlock/raftlock/admin"
	"github.com/raftlock/raftlock/internal/ports"
	"github.com/raftlock/raftlock/internal/procstop"
)

// The tests run the raftlock command in-process (run) against a cluster of
// three examples/replica processes, built once per test binary.

const testToken = "cli-test-token-0123456789"

var (
	buildOnce  sync.Once
	replicaBin string
	buildErr   error
)

// buildReplica builds examples/replica (once) into a temporary directory.
func buildReplica(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "raftlock-cli-test")
		if err != nil {
			buildErr = err
			return
		}
		replicaBin = filepath.Join(dir, "replica")
		gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
		if _, err := os.Stat(gobin); err != nil {
			gobin = "go"
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, gobin, "build", "-o", replicaBin, "github.com/raftlock/raftlock/examples/replica")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build examples/replica: %v: %s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return replicaBin
}

// replica is one replica process.
type replica struct {
	id, http string
	cmd      *exec.Cmd
	done     chan struct{}
	log      *syncBuffer
}

func (r *replica) signal(sig syscall.Signal) {
	select {
	case <-r.done:
	default:
		r.cmd.Process.Signal(sig)
	}
}

// freeze SIGSTOPs the replica and waits until it has stopped.
func (r *replica) freeze(t *testing.T) {
	t.Helper()
	r.signal(syscall.SIGSTOP)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := procstop.Wait(ctx, r.cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
}

func (r *replica) kill() {
	r.signal(syscall.SIGCONT)
	r.signal(syscall.SIGKILL)
	<-r.done
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startCluster starts three replicas (test timing, bearer token) and waits
// until every one is ready with the same leader.
func startCluster(t *testing.T) []*replica {
	t.Helper()
	bin := buildReplica(t)
	addrs, err := ports.Free(9)
	if err != nil {
		t.Fatal(err)
	}
	join := strings.Join([]string{addrs[1], addrs[4], addrs[7]}, ",")
	var reps []*replica
	for i := range 3 {
		id := fmt.Sprintf("r%d", i+1)
		r := &replica{id: id, http: addrs[3*i+2], done: make(chan struct{}), log: &syncBuffer{}}
		r.cmd = exec.Command(bin, "-id", id, "-data-dir", filepath.Join(t.TempDir(), id), "-bind", addrs[3*i], "-gossip", addrs[3*i+1],
			"-join", join, "-bootstrap-expect", "3", "-http", r.http, "-timing", "test")
		r.cmd.Env = append(os.Environ(), "RAFTLOCK_ADMIN_TOKEN="+testToken)
		r.cmd.Stdout, r.cmd.Stderr = r.log, r.log
		r.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := r.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { r.cmd.Wait(); close(r.done) }()
		t.Cleanup(func() {
			r.kill()
			if t.Failed() {
				t.Logf("--- log of %s ---\n%s", r.id, r.log.String())
			}
		})
		reps = append(reps, r)
	}
	waitFor(t, 60*time.Second, "a ready cluster of three", func() bool {
		leader := ""
		for _, r := range reps {
			select {
			case <-r.done:
				t.Fatalf("%s exited:\n%s", r.id, r.log.String())
			default:
			}
			st, err := statusOf(r)
			if err != nil || !st.Ready || st.LeaderID == "" || (leader != "" && st.LeaderID != leader) || len(st.Servers) != 3 {
				return false
			}
			leader = st.LeaderID
		}
		return true
	})
	return reps
}

func statusOf(r *replica) (admin.StatusJSON, error) {
	var st admin.StatusJSON
	out, _, code := cli(r, "-o", "json", "-timeout", "2s", "status")
	if code != 0 {
		return st, fmt.Errorf("status exit %d", code)
	}
	return st, json.Unmarshal([]byte(out), &st)
}

// cli runs the raftlock command against replica r (token in the
// environment) and returns its output and exit status.
func cli(r *replica, args ...string) (stdout, stderr string, code int) {
	return cliCtx(context.Background(), r, args...)
}

func cliCtx(ctx context.Context, r *replica, args ...string) (stdout, stderr string, code int) {
	var o, e syncBuffer
	env := map[string]string{"RAFTLOCK_ADDR": "http://" + r.http, "RAFTLOCK_ADMIN_TOKEN": testToken}
	code = run(ctx, args, func(k string) string { return env[k] }, &o, &e)
	return o.String(), e.String(), code
}

func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// leaderOf returns the replica that leads and one that follows.
func leaderOf(t *testing.T, reps []*replica) (leader, follower *replica) {
	t.Helper()
	st, err := statusOf(reps[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range reps {
		if r.id == st.LeaderID {
			leader = r
		} else if follower == nil {
			follower = r
		}
	}
	if leader == nil {
		t.Fatalf("leader %q is none of the replicas", st.LeaderID)
	}
	return leader, follower
}

// lockOf reads lock name through r.
func lockOf(t *testing.T, r *replica, name string) admin.LockJSON {
	t.Helper()
	out, errOut, code := cli(r, "-o", "json", "locks", name)
	if code != 0 {
		t.Fatalf("locks %s: exit %d: %s", name, code, errOut)
	}
	var ls struct{ Locks []admin.LockJSON }
	if err := json.Unmarshal([]byte(out), &ls); err != nil {
		t.Fatal(err)
	}
	for _, l := range ls.Locks {
		if l.Name == name {
			return l
		}
	}
	return admin.LockJSON{Name: name}
}
