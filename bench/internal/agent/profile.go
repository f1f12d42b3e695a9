package agent

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"strconv"
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

// EnvCPUProfileHz sets the CPU profile's sampling rate (default Go's 100
// Hz): an idle window of 30 s holds only a few dozen samples at 100 Hz,
// too few to attribute. Rates above 100 cost more of the profiled CPU.
const EnvCPUProfileHz = "RAFTLOCK_BENCH_CPUPROFILE_HZ"

// EnvPerf names a directory: like EnvCPUProfile, but each window is
// recorded by Linux perf (perf record -e cpu-clock -g -p <pid>), as
// perf-<system>-r<index>-<n>.data (perf report -i, or perf script). perf's
// hrtimer sampling sees the short bursts an idle replica runs in, which the
// Go profiler's CPU timers miss on a tick-accounted kernel (a virtual
// machine's: there a 30 s idle window's pprof holds a seventh of the CPU
// the process used).
const EnvPerf = "RAFTLOCK_BENCH_PERF"

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
	a.record(EnvCPUProfile, "cpu", "pprof", system, startAt, stopAt, startCPUProfile, pprof.StopCPUProfile)
	a.record(EnvTrace, "trace", "out", system, startAt, stopAt, trace.Start, trace.Stop)
	a.perf(system, startAt, stopAt)
}

// perf records this process with Linux perf from startAt to stopAt when
// EnvPerf is set; it returns at once. A missing perf binary or a refused
// recording is reported on stderr and never fails the workload.
func (a *Agent) perf(system string, startAt, stopAt int64) {
	dir := os.Getenv(EnvPerf)
	if dir == "" {
		return
	}
	go func() {
		mono.Sleep(startAt)
		name := filepath.Join(dir, fmt.Sprintf("perf-%s-r%d-%d.data", system, a.index, profileSeq.Add(1)))
		secs := fmt.Sprintf("%.3f", time.Duration(stopAt-mono.Now()).Seconds())
		// Not tied to the agent's context: perf must finish writing after
		// the window even when the replica is stopped right after it (perf
		// also stops, and writes, when the process it records exits).
		cmd := exec.Command("perf", "record", "-q", "-e", "cpu-clock", "-F", "999", "-g",
			"-p", strconv.Itoa(os.Getpid()), "-o", name, "--", "sleep", secs)
		if out, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "perf: %v: %s\n", err, out)
		}
	}()
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

// startCPUProfile starts the CPU profile at EnvCPUProfileHz if set.
// runtime.SetCPUProfileRate before pprof.StartCPUProfile is the only way
// to change the rate; pprof's own call then prints a harmless warning
// ("cannot set cpu profile rate until previous profile has finished").
func startCPUProfile(w io.Writer) error {
	if hz, err := strconv.Atoi(os.Getenv(EnvCPUProfileHz)); err == nil && hz > 0 {
		runtime.SetCPUProfileRate(hz)
	}
	return pprof.StartCPUProfile(w)
}
