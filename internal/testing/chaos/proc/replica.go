package proc

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// replica is one replica process of examples/replica, restartable on the
// same data dir.
type replica struct {
	i       int
	id      string
	bin     string
	dataDir string
	logPath string
	args    []string
	net     network

	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{} // closed when the current process exits
	stopped bool          // SIGSTOPped
	starts  int
}

// raftAddr is the Raft/RPC address the replica advertises.
func (r *replica) raftAddr() string {
	for k := 0; k+1 < len(r.args); k++ {
		if r.args[k] == "-advertise" {
			return r.args[k+1]
		}
	}
	return fmt.Sprintf("%s:%d", r.net.Host(r.i), r.net.Port(r.i, 0))
}

func (r *replica) httpAddr() string {
	return fmt.Sprintf("%s:%d", r.net.Host(r.i), r.net.Port(r.i, 2))
}

// start starts the process (it must not be running).
func (r *replica) start() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd != nil {
		return fmt.Errorf("%s already running", r.id)
	}
	logf, err := os.OpenFile(r.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	r.starts++
	fmt.Fprintf(logf, "=== start %d at %s\n", r.starts, time.Now().Format(time.RFC3339Nano))
	cmd := r.net.Command(r.i, r.bin, r.args...)
	// The namespaces' 10.213.x addresses are not loopback: a plaintext bind
	// there must be allowed, and the HTTP API served without authentication
	// (the harness's private networks). Through the environment, which a
	// replica of the previous release (the upgrade class) ignores, unlike an
	// unknown flag.
	cmd.Env = append(os.Environ(), "RAFTLOCK_ALLOW_PLAINTEXT=true", "RAFTLOCK_HTTP_NO_AUTH=true")
	cmd.Stdout, cmd.Stderr = logf, logf
	// Killed with the harness, whatever way the harness dies; its own
	// process group, so a terminal's signals go to the harness only.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start %s: %w", r.id, err)
	}
	done := make(chan struct{})
	r.cmd, r.done, r.stopped = cmd, done, false
	go func() {
		cmd.Wait()
		logf.Close()
		close(done)
	}()
	return nil
}

func (r *replica) running() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cmd != nil
}

func (r *replica) signal(sig syscall.Signal) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd == nil {
		return fmt.Errorf("%s not running", r.id)
	}
	switch sig {
	case syscall.SIGSTOP:
		r.stopped = true
	case syscall.SIGCONT:
		r.stopped = false
	}
	return r.cmd.Process.Signal(sig)
}

// pause and resume: SIGSTOP and SIGCONT.
func (r *replica) pause() error  { return r.signal(syscall.SIGSTOP) }
func (r *replica) resume() error { return r.signal(syscall.SIGCONT) }

// stop ends the process: SIGCONT first (a stopped process cannot act on
// SIGTERM), then sig, then SIGKILL after grace; it waits for the exit.
func (r *replica) stop(sig syscall.Signal, grace time.Duration) {
	r.mu.Lock()
	cmd, done := r.cmd, r.done
	r.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Signal(syscall.SIGCONT)
	cmd.Process.Signal(sig)
	select {
	case <-done:
	case <-time.After(grace):
		cmd.Process.Signal(syscall.SIGKILL)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
		}
	}
	r.mu.Lock()
	if r.cmd == cmd {
		r.cmd, r.stopped = nil, false
	}
	r.mu.Unlock()
}

// exited reports whether the current process ended by itself.
func (r *replica) exited() bool {
	r.mu.Lock()
	done := r.done
	r.mu.Unlock()
	if done == nil {
		return false
	}
	select {
	case <-done:
		return true
	default:
		return false
	}
}

// buildReplica builds examples/replica into dir and returns the binary.
func buildReplica(ctx context.Context, root, dir string, race bool) (string, error) {
	bin := filepath.Join(dir, "replica")
	gobin := filepath.Join(goroot(), "bin", "go")
	if _, err := os.Stat(gobin); err != nil {
		gobin = "go"
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	args := []string{"build", "-o", bin}
	if race {
		args = append(args, "-race")
	}
	cmd := exec.CommandContext(cctx, gobin, append(args, "./examples/replica")...)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build ./examples/replica: %v: %s", err, strings.TrimSpace(string(out)))
	}
	return bin, nil
}
