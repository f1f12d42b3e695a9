package chaos

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/anishathalye/porcupine"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

func envDuration(name string, def time.Duration) time.Duration {
	if v, err := time.ParseDuration(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

// artifactDir is where failed runs leave their history and visualisation.
func artifactDir() string {
	if d := os.Getenv("RAFTLOCK_CHAOS_ARTIFACTS"); d != "" {
		return d
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("raftlock-chaos-%d", time.Now().Unix()))
}

// knownChecks are the checks RAFTLOCK_CHAOS_KNOWN declares known library
// bugs (comma-separated): reported apart, they do not fail the run.
func knownChecks() []string {
	if v := os.Getenv("RAFTLOCK_CHAOS_KNOWN"); v != "" {
		return strings.Split(v, ",")
	}
	return nil
}

// ciDuration is each class's fake workload time in a plain go test run.
var ciDuration = map[string]time.Duration{}

// selectedClasses are the classes RAFTLOCK_CHAOS_CLASSES names (default:
// every class).
func selectedClasses(t *testing.T) []string {
	v := os.Getenv("RAFTLOCK_CHAOS_CLASSES")
	if v == "" || v == "all" {
		return classNames()
	}
	var out []string
	for _, c := range strings.Split(v, ",") {
		if _, ok := classes[c]; !ok {
			t.Fatalf("RAFTLOCK_CHAOS_CLASSES: unknown class %q (have %v)", c, classNames())
		}
		out = append(out, c)
	}
	return out
}

func useShm(t *testing.T) {
	if d, err := os.Stat("/dev/shm"); err == nil && d.IsDir() && os.Getenv("TMPDIR") == "" {
		t.Setenv("TMPDIR", "/dev/shm") // bolt stores: fsync costs real time while fake time stands still
	}
}

// checkOptions are the checks' options of a run or a replay:
// RAFTLOCK_CHAOS_PORCUPINE_TIMEOUT bounds the linearizability check (default
// 60s), RAFTLOCK_CHAOS_KNOWN lists known checks.
func checkOptions() CheckOptions {
	return CheckOptions{PorcupineTimeout: envDuration("RAFTLOCK_CHAOS_PORCUPINE_TIMEOUT", 60*time.Second), Known: knownChecks()}
}

// runChecked runs one seed of a class and checks its histories; it reports
// the failures on t and returns the results.
func runChecked(t *testing.T, cfg simConfig, sum *Summary) (ok bool, schedule string) {
	var hs []*History
	runStart := time.Now()
	synctest.Test(t, func(t *testing.T) { hs = simulate(t, cfg) })
	if len(hs) == 0 {
		t.Errorf("%s: the run itself failed", cfg)
		return false, ""
	}
	ok = true
	for _, h := range hs {
		r := Check(h, checkOptions())
		var artifacts []string
		if !r.OK() {
			ok = false
			var err error
			artifacts, err = SaveFailure(artifactDir(), h, r)
			if err != nil {
				t.Errorf("saving artifacts: %v", err)
			}
			for _, v := range r.Violations {
				t.Errorf("%s%s: %s [%s] %s", cfg, clusterSuffix(h), v.Check, v.Lock, v.Detail)
			}
			t.Errorf("class %s seed %d%s failed (porcupine %s), violated checks %v; history and visualisation: %v", cfg.Class, cfg.Seed, clusterSuffix(h), r.Porcupine, r.ViolatedChecks(), artifacts)
		}
		if sum != nil {
			sum.Add(h, r, artifacts)
		}
		schedule += Schedule(h)
		t.Logf("%s%s: %d ops, %d writes (%d stale rejected, %d unfenced overlaps), %d log events, %d probes (resume %d ms), faults %v, %s porcupine %s in %d ms; lease model: %d steps of %d sessions in %d replays, stopped out of scope %v, %d ms; %v real time",
			cfg, clusterSuffix(h), r.ClientOps, r.Writes, r.StaleRejected, r.UnfencedOverlaps, r.LogEvents, r.Probes, r.ResumeMillis, h.Faults, operatorFigures(h, r), r.Porcupine, r.PorcupineMillis,
			r.Model.Steps, r.Model.Sessions, r.Model.Replays, r.Model.Unchecked, r.Model.Millis, time.Since(runStart).Round(time.Millisecond))
	}
	return ok, schedule
}

// operatorFigures describes a run's operator actions ("" without any):
// how many of each kind and outcome, and the restores installed.
func operatorFigures(h *History, r *Report) string {
	if len(h.Operator) == 0 {
		return ""
	}
	n := map[string]int{}
	for _, op := range h.Operator {
		kind := op.Kind
		switch {
		case op.Kind == ActRevoke && op.Permits > 0:
			kind += "(permits)"
		case op.Kind == ActRevoke && op.Shared:
			kind += "(read)"
		}
		n[kind+" "+op.Result]++
	}
	return fmt.Sprintf("operator actions %d %v (restores installed %d),", len(h.Operator), n, r.RestoresInstalled)
}

func clusterSuffix(h *History) string {
	if h.Cluster == "" {
		return ""
	}
	return " cluster " + h.Cluster
}

// TestInProcessChaos runs seeded in-process clusters (fake time) of every
// fault class under its nemesis and checks every history.
// RAFTLOCK_CHAOS_CLASSES (default all) picks classes, RAFTLOCK_CHAOS_SEEDS
// (default 1) the runs per class, RAFTLOCK_CHAOS_SEED the first seed
// (default 1), RAFTLOCK_CHAOS_DURATION the workload's fake duration per run
// (default: the class's CI duration); RAFTLOCK_CHAOS_REPEAT=k runs each
// seed k times and reports how often the verdict and the fault schedule
// repeated; RAFTLOCK_CHAOS_OUT, if set, receives the summary (JSON and a
// Markdown table).
func TestInProcessChaos(t *testing.T) {
	useShm(t)
	seeds := envInt("RAFTLOCK_CHAOS_SEEDS", 1)
	first := int64(envInt("RAFTLOCK_CHAOS_SEED", 1))
	repeat := max(envInt("RAFTLOCK_CHAOS_REPEAT", 1), 1)
	sum := NewSummary("in-process")
	sum.Notes = append(sum.Notes, "in-process clusters over internal/testing/memnet in testing/synctest (fake time), bolt stores, TTL 1s, nodeopts.TestTiming")
	start := time.Now()
	for _, class := range selectedClasses(t) {
		dur := envDuration("RAFTLOCK_CHAOS_DURATION", ciDuration[class])
		if dur == 0 {
			dur = 20 * time.Second
		}
		for i := range seeds {
			seed := first + int64(i)
			cfg := baseConfig(class, seed, dur)
			t.Run(fmt.Sprintf("class=%s/seed=%d", class, seed), func(t *testing.T) {
				var verdicts, schedules []string
				for range repeat {
					s := sum
					if len(verdicts) > 0 {
						s = nil // repeats are not counted twice
					}
					ok, sched := runChecked(t, cfg, s)
					verdicts = append(verdicts, strconv.FormatBool(ok))
					schedules = append(schedules, sched)
				}
				if repeat > 1 {
					same, sameSched := 0, 0
					for k := range verdicts {
						if verdicts[k] == verdicts[0] {
							same++
						}
						if schedules[k] == schedules[0] {
							sameSched++
						}
					}
					t.Logf("replays of class %s seed %d: verdict %s in %d of %d, fault schedule identical in %d of %d", class, seed, verdicts[0], same, repeat, sameSched, repeat)
				}
			})
		}
	}
	sum.WallTime = time.Since(start).Round(time.Second).String()
	t.Logf("in-process chaos summary:\n%s\n%s", sum.Table(), sum.ClassTable())
	if out := os.Getenv("RAFTLOCK_CHAOS_OUT"); out != "" {
		if err := sum.WriteFile(filepath.Join(out, "latest-inprocess.json")); err != nil {
			t.Error(err)
		}
	}
}

// TestReplayHistory re-checks a saved history (RAFTLOCK_CHAOS_REPLAY=path)
// and prints the porcupine operations of each lock that failed.
func TestReplayHistory(t *testing.T) {
	path := os.Getenv("RAFTLOCK_CHAOS_REPLAY")
	if path == "" {
		t.Skip("set RAFTLOCK_CHAOS_REPLAY to a history JSON file")
	}
	h, err := ReadHistory(path)
	if err != nil {
		t.Fatal(err)
	}
	r := Check(h, checkOptions())
	t.Logf("porcupine %s in %d ms (%d operations)", r.Porcupine, r.PorcupineMillis, r.PorcupineOps)
	for _, v := range r.Violations {
		t.Errorf("%s [%s] %s", v.Check, v.Lock, v.Detail)
	}
	for _, u := range r.Unplaceable(h) {
		t.Log(u)
	}
	if r.Porcupine == porcupine.Illegal { // the diagnosis re-runs porcupine per lock
		for _, l := range r.IllegalLocks() {
			t.Logf("lock %s: %s", l, r.FirstIllegalPrefix(l, h.Start, 25))
		}
	}
	t.Logf("class %s seed %d; rerun it with: RAFTLOCK_CHAOS_CLASSES=%s RAFTLOCK_CHAOS_SEED=%d RAFTLOCK_CHAOS_SEEDS=1 go test ./internal/testing/chaos -run 'TestInProcessChaos$' -v", h.Class, h.Seed, h.Class, h.Seed)
}
