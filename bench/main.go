// Command bench compares raftlock with etcd on the same machine: 3-replica
// clusters on loopback with fsync on, the same workloads run alternately
// several times, medians and p50/p99 reported with the raftlock/etcd ratio,
// plus the machine's limits (fsync latency, a bare hashicorp/raft cluster's
// commit rate). It prints a markdown table and writes a JSON file.
//
//	go run .          # full, about 20 minutes
//	go run . -quick   # about 3 minutes
//
// See README.md for what is measured and how.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/raftlock/raftlock/bench/internal/agent"
	"github.com/raftlock/raftlock/bench/internal/charts"
	"github.com/raftlock/raftlock/bench/internal/cluster"
	"github.com/raftlock/raftlock/bench/internal/hog"
	"github.com/raftlock/raftlock/bench/internal/limits"
	"github.com/raftlock/raftlock/bench/internal/lockservice"
	"github.com/raftlock/raftlock/bench/internal/raftlocksys"
	"github.com/raftlock/raftlock/bench/internal/report"
	"github.com/raftlock/raftlock/bench/internal/workload"
)

func main() {
	if agent.IsChild() {
		agent.ChildMain() // a replica process; never returns
	}
	if hog.IsHog() {
		hog.Main() // the CPU hog; never returns
	}
	os.Exit(run())
}

func run() (code int) {
	quick := flag.Bool("quick", false, "quick mode: one run, shorter workloads (about 3 minutes)")
	systems := flag.String("systems", strings.Join(defaultSystems(), ","), "comma-separated systems to benchmark (also: "+strings.Join(raftlocksys.OptIn, ",")+")")
	workloads := flag.String("workloads", strings.Join(allWorkloads, ","), "comma-separated workloads (also: "+strings.Join(optionalWorkloads, ",")+")")
	withLimits := flag.Bool("limits", true, "measure the limits: fsync latency and a bare raft cluster's commit rate")
	runs := flag.Int("runs", 0, "rounds of each workload (0: 3, or 1 with -quick)")
	keepaliveRuns := flag.Int("keepalive-runs", 0, "rounds that also run the keepalive window (0: every round; at most -runs)")
	duration := flag.Duration("duration", 0, "measured duration of each steady workload run (0: default)")
	out := flag.String("out", "", "JSON output file (default results/latest.json, or results/latest-quick.json with -quick)")
	dirFlag := flag.String("dir", "", "where to put data directories (default: the system temp dir); fsync is measured there")
	timeout := flag.Duration("timeout", 0, "abort after this long (0: 35m, or 6m with -quick)")
	withHog := flag.Bool("hog", false, "run a CPU hog (a busy loop pinned to CPU 0) beside the benchmark for the whole run")
	scaleEtcd := flag.Int("scale-etcd-max-locks", 0, "scale workload: largest size etcd runs (0: 100,000)")
	scaleMax := flag.Int("scale-max-locks", 0, "scale workload: largest size run at all (0: every size)")
	scaleMin := flag.Int("scale-min-locks", 0, "scale workload: smallest size run at all (0: every size)")
	scaleRounds := flag.Int("scale-snapshot-rounds", 0, "scale workload: quiet and during-a-snapshot probes per size, in turn (0: 1)")
	flag.Parse()

	opts := defaults(*quick)
	var err error
	if opts.Systems, err = parseList(*systems, lockservice.Names()); err != nil {
		return fail("-systems: %v", err)
	}
	if opts.Workloads, err = parseList(*workloads, slices.Concat(allWorkloads, optionalWorkloads)); err != nil {
		return fail("-workloads: %v", err)
	}
	opts.Limits = *withLimits
	if *runs < 0 || *keepaliveRuns < 0 {
		return fail("-runs and -keepalive-runs must not be negative (0: the default)")
	}
	if *runs > 0 {
		opts.Runs = *runs
		opts.KeepaliveRuns = *runs // every round, as the default
	}
	if *keepaliveRuns > 0 {
		opts.KeepaliveRuns = min(*keepaliveRuns, opts.Runs)
	}
	if *scaleEtcd > 0 {
		opts.Params.ScaleEtcdMaxLocks = *scaleEtcd
	}
	if *scaleMax > 0 {
		opts.Params.ScaleSizes = slices.DeleteFunc(opts.Params.ScaleSizes, func(s workload.ScaleSize) bool { return s.Locks > *scaleMax })
	}
	if *scaleMin > 0 {
		opts.Params.ScaleSizes = slices.DeleteFunc(opts.Params.ScaleSizes, func(s workload.ScaleSize) bool { return s.Locks < *scaleMin })
	}
	if *scaleRounds > 0 {
		opts.Params.ScaleSnapshotRounds = *scaleRounds
	}
	if *duration > 0 {
		opts.Params.Duration = *duration
	}
	if *out == "" {
		*out = "results/latest.json"
		if *quick {
			*out = "results/latest-quick.json"
		}
	}
	if *timeout == 0 {
		*timeout = 35 * time.Minute
		if *quick {
			*timeout = 6 * time.Minute
		}
	}

	// Replica processes die with us on every path: deferred here, on
	// signals through ctx, and by their parent-death signal and stdin EOF
	// if we are killed outright.
	defer cluster.KillAll()
	defer func() {
		if p := recover(); p != nil {
			cluster.KillAll()
			panic(p)
		}
	}()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()

	dir, err := os.MkdirTemp(*dirFlag, "raftlock-bench-")
	if err != nil {
		return fail("work dir: %v", err)
	}
	defer os.RemoveAll(dir)

	if *withHog {
		h, err := hog.Start(0)
		if err != nil {
			return fail("%v", err)
		}
		defer h.Stop()
		opts.Hog = true
		logf("[hog] a busy loop pinned to CPU %d runs beside the benchmark", h.CPU)
	}
	doc := &report.Document{
		Started:  time.Now().UTC(),
		Mode:     map[bool]string{true: "quick", false: "full"}[*quick],
		Machine:  report.DescribeMachine(),
		Settings: map[string]any{"options": opts},
	}
	if opts.Limits {
		doc.Limits = measureLimits(ctx, dir, opts)
	}
	b := &bench{opts: opts, dir: dir}
	b.run(ctx)
	if err := ctx.Err(); err != nil {
		b.problem("aborted: %v", err)
		code = 1
	}
	cluster.KillAll()

	doc.Elapsed = time.Since(doc.Started).Round(time.Second).String()
	doc.LoadEnd = report.LoadAvg()
	doc.Metrics = report.MetricsJSON(b.metrics.Metrics())
	doc.Problems = b.problems
	doc.CDFs = b.cdfs
	printReport(doc, b)
	if err := report.WriteJSON(*out, doc); err != nil {
		return fail("write %s: %v", *out, err)
	}
	logf("wrote %s (%s)", *out, doc.Elapsed)
	_, xs, series := growthSeries(b)
	files, err := charts.Write(strings.TrimSuffix(*out, ".json"), doc, charts.Growth{Locks: xs, Series: series})
	if err != nil {
		logf("charts: %v", err)
	}
	for _, f := range files {
		logf("wrote %s", f)
	}
	return code
}

// measureLimits measures the fsync latency of the work directory and a bare
// raft cluster's commit rate.
func measureLimits(ctx context.Context, dir string, opts options) *report.Limits {
	l := &report.Limits{}
	logf("[limits] fsync latency in %s", dir)
	f, err := limits.Fsync(dir, opts.FsyncIterations, time.Minute)
	if err != nil {
		l.Errors = append(l.Errors, "fsync: "+err.Error())
	} else {
		l.Fsync = f
		logf("[limits] fsync p50 %.2f ms, p99 %.2f ms", f.Latency.P50, f.Latency.P99)
	}
	if r, err := limits.FsyncRates(dir, []int{1, 3}, 2*time.Second); err != nil {
		l.Errors = append(l.Errors, "fsync rates: "+err.Error())
	} else {
		l.FsyncRates = r
		for _, x := range r {
			logf("[limits] fdatasync with %d writer(s): %.0f/s each", x.Writers, x.PerWriter)
		}
	}
	stores := []string{limits.StoreBolt}
	if slices.Contains(opts.Systems, raftlocksys.WALName) {
		stores = append(stores, limits.StoreWAL)
	}
	for _, store := range stores {
		raftDir, err := os.MkdirTemp(dir, "bare-raft-")
		var rl []report.RaftLimit
		if err == nil {
			rl, err = limits.BareRaft(ctx, raftDir, store, opts.RaftAppliers, opts.RaftDuration)
			os.RemoveAll(raftDir)
		}
		if err != nil {
			l.Errors = append(l.Errors, "bare raft ("+store+"): "+err.Error())
		}
		for _, r := range rl {
			logf("[limits] bare raft (%s), %d appliers: %.0f commits/s, p50 %.2f ms, p99 %.2f ms",
				store, r.Appliers, r.CommitsPerSec, r.Latency.P50, r.Latency.P99)
		}
		l.BareRaft = append(l.BareRaft, rl...)
	}
	for _, store := range stores {
		raftDir, err := os.MkdirTemp(dir, "bare-raft-batched-")
		var bl []report.BatchedLimit
		if err == nil {
			bl, err = limits.BatchedRaft(ctx, raftDir, store, opts.BatchedWorkers, opts.BatchedDepths, opts.RaftDuration)
			os.RemoveAll(raftDir)
		}
		if err != nil {
			l.Errors = append(l.Errors, "bare raft, batched ("+store+"): "+err.Error())
		}
		for _, r := range bl {
			logf("[limits] bare raft (%s), ideal group commit, %d workers, %d in flight, gather %v (woken %v): %.0f commands/s, %.1f per entry, p50 %.2f ms",
				store, r.Workers, r.Depth, r.Gather, r.Woken, r.CommandsPerSec, r.CommandsPerEntry, r.Latency.P50)
		}
		l.Batched = append(l.Batched, bl...)
	}
	return l
}

// printReport writes the markdown report to stdout.
func printReport(doc *report.Document, b *bench) {
	w := os.Stdout
	fmt.Fprintf(w, "## raftlock vs etcd (%s mode, %s, started %s)\n\n", doc.Mode, doc.Elapsed, doc.Started.Format(time.RFC3339))
	report.WriteMachine(w, doc.Machine)
	fmt.Fprintf(w, "- 3 replicas per system, one process each, loopback, fsync on; medians over runs (n = runs), session TTL %v\n", b.opts.Params.TTL)
	if b.opts.Hog {
		fmt.Fprintln(w, "- with a CPU hog: a busy loop pinned to CPU 0 for the whole run (-hog)")
	}
	report.WriteLimits(w, doc.Limits)
	fmt.Fprintln(w)
	report.WriteTable(w, b.metrics.Metrics())
	var floor strings.Builder
	report.WriteFloorShares(&floor, b.metrics.Metrics())
	if floor.Len() > 0 {
		fmt.Fprintf(w, "\nraftlock against the floor of the same run (its median: a rate as a share of the floor's, a cost as a multiple of it; bench/README.md, \"The floor\"):\n\n%s", floor.String())
	}
	writeGrowth(w, b)
	if len(doc.Problems) > 0 {
		fmt.Fprintln(w, "\nNotes:")
		for _, p := range doc.Problems {
			fmt.Fprintf(w, "- %s\n", p)
		}
	}
}

func fail(format string, args ...any) int {
	fmt.Fprintf(os.Stderr, "bench: "+format+"\n", args...)
	return 2
}

// writeGrowth writes the cost-growth table of workload 9, if it ran.
func writeGrowth(w *os.File, b *bench) {
	if !b.opts.has("scale") {
		return
	}
	labels, xs, series := growthSeries(b)
	fmt.Fprintln(w, "\n### Cost growth (workload 9; exponent: log-log slope against the lock count, sessions ×10 with locks)")
	fmt.Fprintln(w)
	report.WriteGrowth(w, b.metrics.Metrics(), labels, xs, series)
}

// growthSeries returns the sizes of workload 9 (labels, lock counts) and
// the quantities of the cost-growth table and chart; nothing if it did not
// run.
func growthSeries(b *bench) (labels []string, xs []float64, series []report.GrowthSeries) {
	if !b.opts.has("scale") {
		return nil, nil, nil
	}
	sizes := b.opts.Params.ScaleSizes
	keys := func(suffix string) []string {
		var out []string
		for _, s := range sizes {
			out = append(out, workload.ScaleKey(s)+suffix)
		}
		return out
	}
	for _, s := range sizes {
		labels = append(labels, report.FormatNumber(float64(s.Sessions), 0)+" / "+report.FormatNumber(float64(s.Locks), 0))
		xs = append(xs, float64(s.Locks))
	}
	return labels, xs, []report.GrowthSeries{
		{Name: "RSS per node", Unit: "MiB", Digits: 1, Keys: keys("rss_mib_mean")},
		{Name: "keepalive CPU per node", Unit: "s", Digits: 2, Keys: keys("cpu_s_per_node")},
		{Name: "snapshot", Unit: "s", Digits: 2, Keys: keys("snapshot_s")},
		{Name: "snapshot size", Unit: "MiB", Digits: 1, Keys: keys("snapshot_mib")},
		{Name: "restart", Unit: "s", Digits: 2, Keys: keys("restart_s")},
		{Name: "fill", Unit: "locks/s", Digits: 0, Keys: keys("acquire_locks_per_s")},
	}
}
