package agent

import (
	"fmt"
	"io"
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

// profileWindow profiles (EnvCPUProfile) and traces (EnvTrace) this
// process from startAt to stopAt (monotonic instants) when asked; it
// returns at once. Each runs on its own goroutine and never fails the
// workload: a file that cannot be written is reported on stderr.
func (a *Agent) profileWindow(system string, startAt, stopAt int64) {
	a.record(EnvCPUProfile, "cpu", "pprof", system, startAt, stopAt, pprof.StartCPUProfile, pprof.StopCPUProfile)
	a.record(EnvTrace, "trace", "out", system, startAt, stopAt, trace.Start, trace.Stop)
}

// record writes <kind>-<system>-r<index>-<n>.<ext> into the directory named
// by the environment variable env (if set), from startAt to stopAt.
func (a *Agent) record(env, kind, ext, system string, startAt, stopAt int64, start func(io.Writer) error, stop func()) {
	dir := os.Getenv(env)
	if dir == "" {
		return
	}
	go func() {
		mono.Sleep(startAt)
		name := filepath.Join(dir, fmt.Sprintf("%s-%s-r%d-%d.%s", kind, system, a.index, profileSeq.Add(1), ext))
		f, err := os.Create(name)
		if err != nil {
			fmt.Fprintln(os.Stderr, kind+":", err)
			return
		}
		defer f.Close()
		if err := start(f); err != nil {
			fmt.Fprintln(os.Stderr, kind+":", err)
			return
		}
		select {
		case <-time.After(time.Duration(stopAt - mono.Now())):
		case <-a.ctx.Done():
		}
		stop()
	}()
}
