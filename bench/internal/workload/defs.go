package workload

import (
	"fmt"

	"github.com/raftlock/raftlock/bench/internal/report"
)

// Metric definitions. Keys are stable (they name the JSON metrics); the
// workload labels carry the sizes used.

func def(workload, key, name, unit string, digits int, higher bool) report.Def {
	return report.Def{Key: key, Workload: workload, Name: name, Unit: unit, Digits: digits, Higher: higher}
}

func hidden(workload, key, name string) report.Def {
	return report.Def{Key: key, Workload: workload, Name: name, Hidden: true}
}

// lockUnlockDefs are the metrics of a Lock+Unlock loop (workloads 1 and 2).
type lockUnlockDefs struct{ ops, p50, p99, errs, cpu report.Def }

// cpuDef is the CPU-per-operation metric of workload w (key prefix k): the
// three replica processes' CPU over the window, client work included, per
// completed operation — what a machine pays for one.
func cpuDef(w, k, op string) report.Def {
	return def(w, k+"cpu_us_per_op", "CPU per "+op+", all replica processes", "µs", 0, false)
}

func uncontendedDefs(onLeader bool) lockUnlockDefs {
	w, k := "1. uncontended, 1 worker in a follower's process", "uncontended."
	if onLeader {
		w, k = "1. uncontended, 1 worker in the leader's process", "uncontended_leader."
	}
	return lockUnlockDefs{
		ops:  def(w, k+"ops_per_s", "Lock+Unlock/s", "", 0, true),
		p50:  def(w, k+"p50_ms", "Lock+Unlock p50", "ms", 2, false),
		p99:  def(w, k+"p99_ms", "Lock+Unlock p99", "ms", 2, false),
		errs: hidden(w, k+"errors", "failed operations"),
		cpu:  cpuDef(w, k, "Lock+Unlock"),
	}
}

func distinctDefs(n int) lockUnlockDefs {
	w := fmt.Sprintf("2. %d workers, distinct locks", n)
	k := fmt.Sprintf("distinct%d.", n)
	return lockUnlockDefs{
		ops:  def(w, k+"ops_per_s", "Lock+Unlock/s", "", 0, true),
		p50:  def(w, k+"p50_ms", "Lock+Unlock p50", "ms", 2, false),
		p99:  def(w, k+"p99_ms", "Lock+Unlock p99", "ms", 2, false),
		errs: hidden(w, k+"errors", "failed operations"),
		cpu:  cpuDef(w, k, "Lock+Unlock"),
	}
}

type contendedDefSet struct{ rate, p50, p99, overlaps, errs, cpu, entries report.Def }

func contendedDefs(p Params) contendedDefSet {
	w := fmt.Sprintf("3. %d workers, one lock", p.ContendedWorkers)
	return contendedDefSet{
		rate:     def(w, "contended.handoffs_per_s", "handoffs/s", "", 0, true),
		p50:      def(w, "contended.handoff_p50_ms", "Unlock call → next grant p50", "ms", 2, false),
		p99:      def(w, "contended.handoff_p99_ms", "Unlock call → next grant p99", "ms", 2, false),
		overlaps: hidden(w, "contended.overlaps", "grants before the previous holder's Unlock call (must be 0)"),
		errs:     hidden(w, "contended.errors", "failed operations"),
		cpu:      cpuDef(w, "contended.", "hand-off"),
		entries:  def(w, "contended.entries_per_handoff", "log entries per hand-off", "", 2, false),
	}
}

type keepaliveDefSet struct{ entries, cpuMean, cpuMax, sleeps, acquire, held, window, errs report.Def }

func keepaliveDefs(p Params) keepaliveDefSet {
	w := fmt.Sprintf("4. keepalive: %d sessions hold %s locks for %v", p.KeepaliveSessions,
		report.FormatNumber(float64(p.KeepaliveLocks), 0), p.KeepaliveWindow)
	return keepaliveDefSet{
		entries: def(w, "keepalive.log_entries_per_s", "log entries/s", "", 1, false),
		cpuMean: def(w, "keepalive.cpu_s_per_node_mean", "CPU-seconds per node, mean", "s", 2, false),
		cpuMax:  def(w, "keepalive.cpu_s_per_node_max", "CPU-seconds per node, max", "s", 2, false),
		sleeps:  def(w, "keepalive.sleeps_per_s_per_node_mean", "thread wake-ups/s per node, mean (voluntary context switches)", "", 0, false),
		acquire: def(w, "keepalive.acquire_locks_per_s", "filling: locks acquired/s", "", 0, true),
		held:    hidden(w, "keepalive.held", "locks held"),
		window:  hidden(w, "keepalive.window_s", "measured window (s)"),
		errs:    hidden(w, "keepalive.errors", "failed acquisitions"),
	}
}

type failoverDefSet struct{ first, all, errs report.Def }

func failoverDefs(p Params) failoverDefSet {
	w := fmt.Sprintf("5. failover: SIGKILL the leader under %d workers", p.FailoverWorkers)
	return failoverDefSet{
		first: def(w, "failover.first_grant_ms", "kill → next grant of a free lock", "ms", 0, false),
		all:   def(w, "failover.all_workers_ms", "kill → every surviving worker granted again", "ms", 0, false),
		errs:  hidden(w, "failover.errors", "failed operations"),
	}
}

type memoryDefSet struct{ rssMean, rssMax, heap, idle, perLock, acquire, held, errs report.Def }

func memoryDefs(p Params) memoryDefSet {
	w := fmt.Sprintf("6. memory: %s locks held by %d sessions", report.FormatNumber(float64(p.MemoryLocks), 0), p.MemorySessions)
	return memoryDefSet{
		rssMean: def(w, "memory.rss_mib_mean", "RSS per node, mean", "MiB", 1, false),
		rssMax:  def(w, "memory.rss_mib_max", "RSS per node, max", "MiB", 1, false),
		heap:    def(w, "memory.heap_mib_mean", "Go heap in use per node, mean", "MiB", 1, false),
		idle:    def(w, "memory.idle_rss_mib_mean", "idle RSS per node before, mean", "MiB", 1, false),
		perLock: def(w, "memory.bytes_per_lock", "RSS growth per held lock, per node", "B", 0, false),
		acquire: def(w, "memory.acquire_locks_per_s", "filling: locks acquired/s", "", 0, true),
		held:    hidden(w, "memory.held", "locks held"),
		errs:    hidden(w, "memory.errors", "failed acquisitions"),
	}
}
