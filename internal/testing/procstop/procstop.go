// Package procstop waits until a process stopped by SIGSTOP has really
// stopped: kill(2) only queues the signal, and every thread of the process
// stops on its own way back to user mode. Until then the process can still
// answer a request that arrived just before. Tests and demos that freeze a
// process wait for this before they rely on its silence.
package procstop

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// Wait polls /proc/pid/task/*/stat until every thread of pid is stopped
// (state T), or ctx ends. On systems without /proc it returns at once.
func Wait(ctx context.Context, pid int) error {
	if runtime.GOOS != "linux" {
		return nil
	}
	for {
		stopped, err := allStopped(pid)
		if err != nil {
			return err
		}
		if stopped {
			return nil
		}
		t := time.NewTimer(time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("procstop: process %d not stopped: %w", pid, ctx.Err())
		case <-t.C:
		}
	}
}

func allStopped(pid int) (bool, error) {
	stats, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
	if err != nil {
		return false, err
	}
	if len(stats) == 0 {
		return false, fmt.Errorf("procstop: process %d not found", pid)
	}
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err != nil {
			return false, nil // a thread that just exited: look again
		}
		// The state follows the command name, which is in parentheses and
		// may itself contain spaces or parentheses.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 || i+2 >= len(s) {
			return false, fmt.Errorf("procstop: unexpected %s: %q", f, s)
		}
		if st := s[i+2]; st != 'T' && st != 't' {
			return false, nil
		}
	}
	return true, nil
}
