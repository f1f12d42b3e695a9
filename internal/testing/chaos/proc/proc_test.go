package proc

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/raftlock/raftlock/internal/testing/chaos"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// knownIssues are checks that fail because of known, reported library bugs
// not yet fixed (comma-separated check names): their failures are reported
// apart and do not fail the run. Empty: every check counts.
//
// History: stale-validity (a replica resumed from SIGSTOP called a lease
// valid past its deadline, after the leader had expired it) was found here
// and fixed in lockapi (Lease.Err checks the deadline itself).
var knownIssues = ""

func known() []string {
	v, ok := os.LookupEnv("RAFTLOCK_CHAOS_KNOWN")
	if !ok {
		v = knownIssues
	}
	var out []string
	for _, k := range strings.Split(v, ",") {
		if k = strings.TrimSpace(k); k != "" {
			out = append(out, k)
		}
	}
	return out
}

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

// TestMultiProcess runs replica processes of examples/replica under the
// nemesis and checks the history. Environment:
//
//	RAFTLOCK_CHAOS_PROC_CLASS     comma-separated classes (default: all of Classes)
//	RAFTLOCK_CHAOS_PROC_RUNS      runs per class (default 1); RAFTLOCK_CHAOS_PROC_SEED first seed (default 1)
//	RAFTLOCK_CHAOS_PROC_DURATION  workload per run (default 25s)
//	RAFTLOCK_CHAOS_PROC_REPLICAS  replicas (default: 3, and 5 on even seeds when runs > 1)
//	RAFTLOCK_CHAOS_PROC_TTL       session TTL (default 1.5s, with -timing test)
//	RAFTLOCK_CHAOS_PROC_NET       auto (default), netns or loopback
//	RAFTLOCK_CHAOS_PROC_RACE=0    build the replicas without -race (default: with; a data race in their output fails the run)
//	RAFTLOCK_CHAOS_OUT            directory receiving latest-multiprocess.json/.md
//	RAFTLOCK_CHAOS_ARTIFACTS      where a failed run leaves its history, visualisation and replica logs
//	RAFTLOCK_CHAOS_KNOWN          checks whose failures are known library bugs (default: knownIssues)
//	RAFTLOCK_CHAOS_PROC=1         run at all (it builds a binary, runs processes, and as root
//	                              creates network namespaces): .ci/run sets it
func TestMultiProcess(t *testing.T) {
	if os.Getenv("RAFTLOCK_CHAOS_PROC") != "1" {
		t.Skip("set RAFTLOCK_CHAOS_PROC=1 to run the multi-process layer")
	}
	root, err := filepath.Abs("../../../..")
	if err != nil {
		t.Fatal(err)
	}
	runs := envInt("RAFTLOCK_CHAOS_PROC_RUNS", 1)
	classes := Classes
	if v := os.Getenv("RAFTLOCK_CHAOS_PROC_CLASS"); v != "" && v != "all" {
		classes = strings.Split(v, ",")
	}
	first := int64(envInt("RAFTLOCK_CHAOS_PROC_SEED", 1))
	dur := envDuration("RAFTLOCK_CHAOS_PROC_DURATION", 25*time.Second)
	ttl := envDuration("RAFTLOCK_CHAOS_PROC_TTL", 1500*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(runs*len(classes))*(dur+5*time.Minute))
	defer cancel()

	buildDir := t.TempDir()
	// Race-built by default: the race-instrumented packages are in the build
	// cache after `go test -race ./...`, and a race in a replica fails the run.
	race := os.Getenv("RAFTLOCK_CHAOS_PROC_RACE") != "0"
	bin, err := buildReplica(ctx, root, buildDir, race)
	if err != nil {
		t.Fatal(err)
	}
	oldBin := ""
	for _, c := range classes {
		if c == "upgrade" {
			if oldBin, err = buildAt(ctx, root, PreviousRelease, buildDir, race); err != nil {
				t.Fatalf("upgrade class: %v", err)
			}
		}
	}
	sum := chaos.NewSummary("multi-process")
	if race {
		sum.Notes = append(sum.Notes, "replicas built with -race")
	}
	start := time.Now()
	for _, class := range classes {
		for k := range runs {
			seed := first + int64(k)
			replicas := envInt("RAFTLOCK_CHAOS_PROC_REPLICAS", 0)
			if replicas == 0 {
				replicas = 3
				if runs > 1 && seed%2 == 0 {
					replicas = 5
				}
			}
			t.Run(fmt.Sprintf("class=%s/seed=%d", class, seed), func(t *testing.T) {
				runStart := time.Now()
				h, dir, err := Run(ctx, Options{
					Class: class, Seed: seed, Replicas: replicas, Duration: dur, TTL: ttl, Timing: "test",
					Net: os.Getenv("RAFTLOCK_CHAOS_PROC_NET"), Root: root, Bin: bin, OldBin: oldBin, Logf: t.Logf,
					OnInterrupt: func() { os.RemoveAll(buildDir) },
				})
				keep := false
				defer func() {
					if dir != "" && !keep {
						os.RemoveAll(dir)
					}
				}()
				if err != nil {
					keep = true
					t.Fatalf("run: %v (logs in %s)", err, dir)
				}
				r := chaos.Check(h, chaos.CheckOptions{PorcupineTimeout: envDuration("RAFTLOCK_CHAOS_PORCUPINE_TIMEOUT", 60*time.Second), ClockSlack: int64(time.Millisecond), Known: known()})
				var artifacts []string
				if !r.OK() {
					keep = true
					adir := os.Getenv("RAFTLOCK_CHAOS_ARTIFACTS")
					if adir == "" {
						adir = dir
					}
					artifacts, err = chaos.SaveFailure(adir, h, r)
					if err != nil {
						t.Errorf("saving artifacts: %v", err)
					}
					artifacts = append(artifacts, dir+" (replica logs, data dirs, resource.db)")
					for _, v := range r.Violations {
						t.Errorf("class %s seed %d: %s [%s] %s", class, seed, v.Check, v.Lock, v.Detail)
					}
					t.Errorf("class %s seed %d failed (porcupine %s), violated checks %v; artifacts: %v", class, seed, r.Porcupine, r.ViolatedChecks(), artifacts)
				}
				sum.Add(h, r, artifacts)
				t.Logf("class %s seed %d (%d replicas, %v): %d probes (resume %d ms), %d ops, %d writes (%d stale rejected, %d unfenced overlaps), %d log events, faults %v, porcupine %s; notes %v; %v",
					class, seed, replicas, dur, r.Probes, r.ResumeMillis, r.ClientOps, r.Writes, r.StaleRejected, r.UnfencedOverlaps, r.LogEvents, h.Faults, r.Porcupine, h.Notes, time.Since(runStart).Round(time.Second))
			})
		}
	}
	sum.WallTime = time.Since(start).Round(time.Second).String()
	t.Logf("multi-process chaos summary:\n%s\n%s", sum.Table(), sum.ClassTable())
	if out := os.Getenv("RAFTLOCK_CHAOS_OUT"); out != "" {
		if err := sum.WriteFile(filepath.Join(out, "latest-multiprocess.json")); err != nil {
			t.Error(err)
		}
	}
}
