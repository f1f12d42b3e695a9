// Package hog is the benchmark's CPU hog: a process that spins on one CPU,
// pinned there, for the whole run (-hog), so that both systems are measured
// on a machine that is busy with other work, as production machines are.
// The hog re-executes the benchmark binary (EnvHog); it dies with the
// benchmark (parent-death signal, stdin EOF) and is killed at the end.
package hog

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// EnvHog makes the benchmark binary run as a hog; its value is the CPU to
// pin to.
const EnvHog = "RAFTLOCK_BENCH_HOG"

// IsHog reports whether this process was started as a hog.
func IsHog() bool { return os.Getenv(EnvHog) != "" }

// Main spins on the CPU named by EnvHog until stdin closes. It never returns.
func Main() {
	cpu, err := strconv.Atoi(os.Getenv(EnvHog))
	if err != nil {
		fmt.Fprintln(os.Stderr, "hog:", err)
		os.Exit(2)
	}
	runtime.GOMAXPROCS(2) // the spinner and the stdin watcher
	go func() {
		io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}()
	runtime.LockOSThread()
	var set unix.CPUSet
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil { // this thread
		fmt.Fprintln(os.Stderr, "hog: pin:", err)
	}
	x := uint64(1)
	for {
		x = x*6364136223846793005 + 1442695040888963407 // busy, not optimised away
		if x == 0 {
			fmt.Fprint(os.Stderr, "")
		}
	}
}

// Hog is a running hog process.
type Hog struct {
	CPU   int
	cmd   *exec.Cmd
	stdin io.Closer
}

// Start starts a hog pinned to cpu.
func Start(cpu int) (*Hog, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), EnvHog+"="+strconv.Itoa(cpu))
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("hog: %w", err)
	}
	return &Hog{CPU: cpu, cmd: cmd, stdin: stdin}, nil
}

// Stop kills the hog and waits for it.
func (h *Hog) Stop() {
	h.cmd.Process.Signal(syscall.SIGKILL)
	h.stdin.Close()
	h.cmd.Wait()
}
