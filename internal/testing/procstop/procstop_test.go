package procstop

import (
	"context"
	"os/exec"
	"runtime"
	"syscall"
	"testing"
	"time"
)

func TestWait(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("needs /proc")
	}
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Skip("no sleep command:", err)
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGCONT)
		cmd.Process.Kill()
		cmd.Wait()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := Wait(ctx, cmd.Process.Pid); err == nil {
		t.Fatal("a running process reported stopped")
	}
	cmd.Process.Signal(syscall.SIGSTOP)
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := Wait(ctx, cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
}
