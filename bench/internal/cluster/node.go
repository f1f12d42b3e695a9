package cluster

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/raftlock/raftlock/bench/internal/agent"
	"github.com/raftlock/raftlock/bench/internal/procstat"
)

// Node is one replica process.
type Node struct {
	Index int
	PID   int
	Agent *agent.Client

	cmd     *exec.Cmd
	stdin   io.Closer // closing it tells the child its parent is gone
	logPath string
	exited  chan struct{} // closed once the process has been reaped
	killed  atomic.Bool
	crashed bool // its crash was reported (Cluster.Crashed)
}

// spawn starts replica process cfg.Index and connects to its agent.
func spawn(ctx context.Context, dir string, cfg agent.ChildConfig) (*Node, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	env, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	logPath := filepath.Join(dir, fmt.Sprintf("replica-%d.log", cfg.Index))
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logFile.Close() // the child has its own descriptor
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), agent.EnvChild+"="+string(env))
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setpgid:   true,            // our terminal's Ctrl-C reaches only us; we kill them
		Pdeathsig: syscall.SIGKILL, // and they die with us even if we cannot
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("cluster: start replica %d: %w", cfg.Index, err)
	}
	n := &Node{Index: cfg.Index, PID: cmd.Process.Pid, cmd: cmd, stdin: stdin, logPath: logPath, exited: make(chan struct{})}
	track(n)
	go func() {
		cmd.Wait()
		close(n.exited)
		untrack(n)
	}()

	addr, err := readAgentAddr(ctx, stdout)
	if err != nil {
		n.Kill()
		return nil, fmt.Errorf("cluster: replica %d: %w%s", cfg.Index, err, n.logTail())
	}
	n.Agent, err = agent.Dial(addr)
	if err != nil {
		n.Kill()
		return nil, fmt.Errorf("cluster: replica %d: dial agent: %w", cfg.Index, err)
	}
	return n, nil
}

// readAgentAddr reads the child's "agent <addr>" line, then drains stdout.
func readAgentAddr(ctx context.Context, stdout io.Reader) (string, error) {
	ch := make(chan string, 1)
	go func() {
		br := bufio.NewReader(stdout)
		line, _ := br.ReadString('\n')
		ch <- strings.TrimSpace(line)
		io.Copy(io.Discard, br)
	}()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	select {
	case line := <-ch:
		addr, ok := strings.CutPrefix(line, "agent ")
		if !ok {
			return "", fmt.Errorf("unexpected first line %q", line)
		}
		return addr, nil
	case <-ctx.Done():
		return "", fmt.Errorf("no agent address: %w", ctx.Err())
	}
}

// Usage returns the process's CPU time and RSS.
func (n *Node) Usage() (procstat.Usage, error) { return procstat.Read(n.PID) }

// Alive reports whether the process is still running.
func (n *Node) Alive() bool {
	select {
	case <-n.exited:
		return false
	default:
		return !n.killed.Load()
	}
}

// Kill sends SIGKILL to the process and waits until it is reaped. (os.Process
// signals through a pidfd: never a recycled pid.)
func (n *Node) Kill() {
	n.killed.Store(true)
	n.cmd.Process.Signal(syscall.SIGKILL)
	n.stdin.Close()
	<-n.exited
	if n.Agent != nil {
		n.Agent.Close()
	}
}

// logTail returns the end of the process's log for error messages.
func (n *Node) logTail() string {
	b, err := os.ReadFile(n.logPath)
	if err != nil || len(b) == 0 {
		return ""
	}
	const max = 2000
	if len(b) > max {
		b = b[len(b)-max:]
	}
	return "\n--- " + n.logPath + " (tail) ---\n" + string(b)
}
