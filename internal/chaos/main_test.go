package chaos

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

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

// configFor derives a run's shape from its seed: odd seeds run 3 nodes,
// even ones 5.
func configFor(seed int64, d time.Duration) simConfig {
	n := 3
	if seed%2 == 0 {
		n = 5
	}
	return simConfig{Seed: seed, Nodes: n, Clients: 2 * n, Locks: 3, Duration: d, TTL: time.Second, Faults: true}
}

// artifactDir is where failed runs leave their history and visualisation.
func artifactDir() string {
	if d := os.Getenv("RAFTLOCK_CHAOS_ARTIFACTS"); d != "" {
		return d
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("raftlock-chaos-%d", time.Now().Unix()))
}

// TestInProcessChaos runs seeded in-process clusters (fake time) under the
// nemesis and checks every history. RAFTLOCK_CHAOS_SEEDS (default 4) sets
// the number of runs, RAFTLOCK_CHAOS_SEED the first seed (default 1),
// RAFTLOCK_CHAOS_DURATION the workload's fake duration per run (default 30s);
// RAFTLOCK_CHAOS_OUT, if set, receives the summary (JSON and a Markdown table).
func TestInProcessChaos(t *testing.T) {
	if d, err := os.Stat("/dev/shm"); err == nil && d.IsDir() && os.Getenv("TMPDIR") == "" {
		t.Setenv("TMPDIR", "/dev/shm") // bolt stores: fsync costs real time while fake time stands still
	}
	seeds := envInt("RAFTLOCK_CHAOS_SEEDS", 4)
	first := int64(envInt("RAFTLOCK_CHAOS_SEED", 1))
	dur := envDuration("RAFTLOCK_CHAOS_DURATION", 30*time.Second)
	sum := NewSummary("in-process")
	sum.Notes = append(sum.Notes, "in-process clusters over internal/memnet in testing/synctest (fake time), bolt stores, TTL 1s, node.TestTiming")
	start := time.Now()
	for i := range seeds {
		seed := first + int64(i)
		cfg := configFor(seed, dur)
		var h *History
		ok := t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			runStart := time.Now()
			synctest.Test(t, func(t *testing.T) { h = simulate(t, cfg) })
			if h == nil {
				return
			}
			r := Check(h, CheckOptions{PorcupineTimeout: envDuration("RAFTLOCK_CHAOS_PORCUPINE_TIMEOUT", 60*time.Second)})
			var artifacts []string
			if !r.OK() {
				var err error
				artifacts, err = SaveFailure(artifactDir(), h, r)
				if err != nil {
					t.Errorf("saving artifacts: %v", err)
				}
				for _, v := range r.Violations {
					t.Errorf("%s: %s [%s] %s", cfg, v.Check, v.Lock, v.Detail)
				}
				t.Errorf("seed %d failed (porcupine %s); history and visualisation: %v", seed, r.Porcupine, artifacts)
			}
			sum.Add(h, r, artifacts)
			t.Logf("%s: %d ops, %d writes (%d stale rejected, %d unfenced overlaps), %d log events, faults %v, porcupine %s in %d ms; %v real time",
				cfg, r.ClientOps, r.Writes, r.StaleRejected, r.UnfencedOverlaps, r.LogEvents, h.Faults, r.Porcupine, r.PorcupineMillis, time.Since(runStart).Round(time.Millisecond))
		})
		if !ok && h == nil {
			t.Errorf("seed %d: the run itself failed", seed)
		}
	}
	sum.WallTime = time.Since(start).Round(time.Second).String()
	t.Logf("in-process chaos summary:\n%s", sum.Table())
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
	r := Check(h, CheckOptions{})
	for _, v := range r.Violations {
		t.Errorf("%s [%s] %s", v.Check, v.Lock, v.Detail)
	}
	for _, u := range r.Unplaceable(h) {
		t.Log(u)
	}
	for _, l := range r.IllegalLocks() {
		t.Logf("lock %s: %s", l, r.FirstIllegalPrefix(l, h.Start, 25))
	}
}
