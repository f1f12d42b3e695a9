//go:build unix

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/raftlock/raftlock/internal/testing/procstop"
)

// proc is one replica process (re-executions of this program).
type proc struct {
	spec    childSpec
	exe     string
	logPath string
	started func(pid int) // may be nil

	mu        sync.Mutex
	cmd       *exec.Cmd
	done      chan struct{} // closed when the current incarnation has exited
	frozen    bool          // SIGSTOPped
	killed    bool          // by the demo (its exit is expected)
	startedAt time.Time
}

func (p *proc) id() string { return p.spec.ID }

// start starts a new incarnation (same id, data dir and addresses).
func (p *proc) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil && !isDone(p.done) {
		return fmt.Errorf("%s is already running", p.spec.ID)
	}
	p.spec.Incarnation++
	spec, err := json.Marshal(p.spec)
	if err != nil {
		return err
	}
	logf, err := os.OpenFile(p.logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	cmd := exec.Command(p.exe)
	cmd.Env = append(os.Environ(), childEnv+"="+string(spec))
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = childProcAttr()
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start %s: %w", p.spec.ID, err)
	}
	done := make(chan struct{})
	go func() {
		cmd.Wait()
		logf.Close()
		close(done)
	}()
	p.cmd, p.done, p.frozen, p.killed, p.startedAt = cmd, done, false, false, time.Now()
	if p.started != nil {
		p.started(cmd.Process.Pid)
	}
	return nil
}

func isDone(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// crashed reports whether the process exited without being killed by the
// demo (it failed: its log says why).
func (p *proc) crashed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd != nil && !p.killed && isDone(p.done)
}

func (p *proc) alive() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd != nil && !isDone(p.done)
}

func (p *proc) signal(sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || isDone(p.done) {
		return fmt.Errorf("%s is not running", p.spec.ID)
	}
	// The child leads its own process group: signal the group.
	if err := syscall.Kill(-p.cmd.Process.Pid, sig); err != nil {
		return fmt.Errorf("signal %v to %s: %w", sig, p.spec.ID, err)
	}
	switch sig {
	case syscall.SIGSTOP:
		p.frozen = true
	case syscall.SIGCONT:
		p.frozen = false
	}
	return nil
}

// freeze pauses the process (SIGSTOP) and returns once every one of its
// threads has stopped (the signal alone only queues the stop).
func (p *proc) freeze() error {
	if err := p.signal(syscall.SIGSTOP); err != nil {
		return err
	}
	p.mu.Lock()
	pid := p.cmd.Process.Pid
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return procstop.Wait(ctx, pid)
}

// thaw resumes a frozen process (SIGCONT).
func (p *proc) thaw() error { return p.signal(syscall.SIGCONT) }

// kill SIGKILLs the process (resuming it first if frozen, so that it dies at
// once) and waits until it has exited.
func (p *proc) kill() {
	p.mu.Lock()
	cmd, done, frozen := p.cmd, p.done, p.frozen
	p.mu.Unlock()
	if cmd == nil || isDone(done) {
		return
	}
	p.mu.Lock()
	p.killed = true
	p.mu.Unlock()
	if frozen {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGCONT)
	}
	syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	<-done
	p.mu.Lock()
	p.frozen = false
	p.mu.Unlock()
}
