package workload

import (
	"fmt"

	"github.com/raftlock/raftlock/bench/internal/report"
)

// Metric definitions, in table order.
var (
	uncontendedW = "1. uncontended, 1 worker (on a follower)"
	uncOps       = report.Def{Key: "uncontended.ops_per_s", Workload: uncontendedW, Name: "Lock+Unlock/s", Higher: true}
	uncP50       = report.Def{Key: "uncontended.p50_ms", Workload: uncontendedW, Name: "Lock+Unlock p50", Unit: "ms", Digits: 2}
	uncP99       = report.Def{Key: "uncontended.p99_ms", Workload: uncontendedW, Name: "Lock+Unlock p99", Unit: "ms", Digits: 2}
	uncErr       = report.Def{Key: "uncontended.errors", Workload: uncontendedW, Name: "errors", Hidden: true}

	contendedW = "3. one lock, contended"
	conRate    = report.Def{Key: "contended.handoffs_per_s", Workload: contendedW, Name: "handoffs/s", Higher: true}
	conP50     = report.Def{Key: "contended.handoff_p50_ms", Workload: contendedW, Name: "release→next grant p50", Unit: "ms", Digits: 2}
	conP99     = report.Def{Key: "contended.handoff_p99_ms", Workload: contendedW, Name: "release→next grant p99", Unit: "ms", Digits: 2}
	conOverlap = report.Def{Key: "contended.overlaps", Workload: contendedW, Name: "grants before the previous release (must be 0)", Hidden: true}
	conErr     = report.Def{Key: "contended.errors", Workload: contendedW, Name: "errors", Hidden: true}

	keepaliveW = "4. keepalive cost"
	kaEntries  = report.Def{Key: "keepalive.log_entries_per_s", Workload: keepaliveW, Name: "log entries/s", Digits: 1}
	kaCPUMean  = report.Def{Key: "keepalive.cpu_s_per_node_mean", Workload: keepaliveW, Name: "CPU-s per node (mean)", Unit: "s", Digits: 2}
	kaCPUMax   = report.Def{Key: "keepalive.cpu_s_per_node_max", Workload: keepaliveW, Name: "CPU-s per node (max)", Unit: "s", Digits: 2}
	kaAcquire  = report.Def{Key: "keepalive.acquire_locks_per_s", Workload: keepaliveW, Name: "filling: locks acquired/s", Higher: true}
	kaHeld     = report.Def{Key: "keepalive.held", Workload: keepaliveW, Name: "locks held", Hidden: true}
	kaWindow   = report.Def{Key: "keepalive.window_s", Workload: keepaliveW, Name: "window", Unit: "s", Hidden: true}
	kaErr      = report.Def{Key: "keepalive.errors", Workload: keepaliveW, Name: "errors", Hidden: true}
	failoverW  = "5. failover (SIGKILL leader)"
	foFirst    = report.Def{Key: "failover.first_grant_ms", Workload: failoverW, Name: "kill → next grant of a free lock", Unit: "ms"}
	foAll      = report.Def{Key: "failover.all_workers_ms", Workload: failoverW, Name: "kill → every surviving worker granted again", Unit: "ms"}
	foErr      = report.Def{Key: "failover.errors", Workload: failoverW, Name: "errors", Hidden: true}
	memoryW    = "6. memory"
	memRSSMean = report.Def{Key: "memory.rss_mib_mean", Workload: memoryW, Name: "RSS per node (mean)", Unit: "MiB", Digits: 1}
	memRSSMax  = report.Def{Key: "memory.rss_mib_max", Workload: memoryW, Name: "RSS per node (max)", Unit: "MiB", Digits: 1}
	memHeap    = report.Def{Key: "memory.heap_mib_mean", Workload: memoryW, Name: "Go heap in use per node (mean)", Unit: "MiB", Digits: 1}
	memBase    = report.Def{Key: "memory.idle_rss_mib_mean", Workload: memoryW, Name: "idle RSS per node before (mean)", Unit: "MiB", Digits: 1}
	memPerLock = report.Def{Key: "memory.bytes_per_lock", Workload: memoryW, Name: "RSS growth per held lock, per node", Unit: "B"}
	memAcquire = report.Def{Key: "memory.acquire_locks_per_s", Workload: memoryW, Name: "filling: locks acquired/s", Higher: true}
	memHeld    = report.Def{Key: "memory.held", Workload: memoryW, Name: "locks held", Hidden: true}
	memErr     = report.Def{Key: "memory.errors", Workload: memoryW, Name: "errors", Hidden: true}
)

// distinctDefs returns the definitions of workload 2 with n workers.
func distinctDefs(n int) (ops, p50, p99, errs report.Def) {
	w := fmt.Sprintf("2. %d workers, distinct locks", n)
	k := fmt.Sprintf("distinct%d.", n)
	return report.Def{Key: k + "ops_per_s", Workload: w, Name: "Lock+Unlock/s", Higher: true},
		report.Def{Key: k + "p50_ms", Workload: w, Name: "Lock+Unlock p50", Unit: "ms", Digits: 2},
		report.Def{Key: k + "p99_ms", Workload: w, Name: "Lock+Unlock p99", Unit: "ms", Digits: 2},
		report.Def{Key: k + "errors", Workload: w, Name: "errors", Hidden: true}
}
