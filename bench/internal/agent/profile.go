package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"runtime/trace"
	"sync/atomic"
	"time"

	"github.com/raftlock/raftlock/bench/internal/mono"
)

// EnvCPUProfile names a directory: when set in the benchmark's environment
// (replica processes inherit it), every replica process writes a CPU profile
// of each Loop's measured window there, as
// cpu-<system>-r<index>-<n>.pprof. Profiling costs a few percent of CPU,
// so figures from a profiled run are not reported.
const EnvCPUProfile = "RAFTLOCK_BENCH_CPUPROFILE"

// EnvTrace names a directory: like EnvCPUProfile, but an execution trace
// (runtime/trace) of each window, trace-<system>-r<index>-<n>.out — where
// a latency-bound loop waits (go tool trace -pprof=sched|net|sync).
const EnvTrace = "RAFTLOCK_BENCH_TRACE"

var profileSeq atomic.Int64

// Profile profiles this process over a window of the parent's choosing (a
// workload without Loop, such as the keepalive window) when EnvCPUProfile
// is set; it returns at once.
func (a *Agent) Profile(args ProfileArgs, _ *Empty) error {
	a.profileWindow(a.system+"-"+args.Label, args.StartAt, args.StopAt)
	return nil
}

// profileWindow profiles this process from startAt to stopAt (monotonic
// instants) when EnvCPUProfile is set; it returns at once otherwise. It
// runs on its own goroutine and never fails the workload: a profile that
// cannot be written is reported on stderr.
func (a *Agent) profileWindow(system string, startAt, stopAt int64) {
	a.traceWindow(system, startAt, stopAt)
	dir := os.Getenv(EnvCPUProfile)
	if dir == "" {
		return
	}
	go func() {
		mono.Sleep(startAt)
		name := filepath.Join(dir, fmt.Sprintf("cpu-%s-r%d-%d.pprof", system, a.index, profileSeq.Add(1)))
		f, err := os.Create(name)
		if err != nil {
			fmt.Fprintln(os.Stderr, "cpu profile:", err)
			return
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "cpu profile:", err)
			return
		}
		select {
		case <-time.After(time.Duration(stopAt - mono.Now())):
		case <-a.ctx.Done():
		}
		pprof.StopCPUProfile()
	}()
}

// traceWindow traces this process from startAt to stopAt when EnvTrace is
// set, like profileWindow.
func (a *Agent) traceWindow(system string, startAt, stopAt int64) {
	dir := os.Getenv(EnvTrace)
	if dir == "" {
		return
	}
	go func() {
		mono.Sleep(startAt)
		name := filepath.Join(dir, fmt.Sprintf("trace-%s-r%d-%d.out", system, a.index, profileSeq.Add(1)))
		f, err := os.Create(name)
		if err != nil {
			fmt.Fprintln(os.Stderr, "trace:", err)
			return
		}
		defer f.Close()
		if err := trace.Start(f); err != nil {
			fmt.Fprintln(os.Stderr, "trace:", err)
			return
		}
		select {
		case <-time.After(time.Duration(stopAt - mono.Now())):
		case <-a.ctx.Done():
		}
		trace.Stop()
	}()
}
