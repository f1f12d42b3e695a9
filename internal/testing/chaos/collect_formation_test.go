package chaos

import (
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// The collector must see what the cluster applies while it forms: the
// cluster version and cluster id entries (cluster-changed events) are
// applied before the nodes are ready. A short run without faults keeps the
// whole log on disk (no snapshot, no restart re-applies the entries later),
// so the disk cross-check replays it from index 1 and compares those events
// with the live ones (the long run's disk seeds 63 and 87, clusters seed 98).
func TestCollectorSeesFormation(t *testing.T) {
	useShm(t)
	cfg := baseConfig("mixed", 1, 2*time.Second)
	cfg.Faults = false
	cfg.Clients = 1
	var hs []*History
	synctest.Test(t, func(t *testing.T) { hs = simulate(t, cfg) })
	h := hs[0]
	if !slices.ContainsFunc(h.Notes, func(n string) bool { return strings.Contains(n, "disk cross-check: 3 replicas' logs compared") }) {
		t.Fatalf("the disk cross-check did not replay the logs: notes %q", h.Notes)
	}
	if len(h.Disagreements) > 0 || len(h.HarnessErrors) > 0 {
		t.Fatalf("disagreements %q, harness errors %q", h.Disagreements, h.HarnessErrors)
	}
	changed := 0
	for _, e := range h.Log {
		if e.Kind == "cluster-changed" {
			changed++
		}
	}
	if changed < 2 {
		t.Fatalf("live log has %d cluster-changed events, want the cluster version's and the cluster id's", changed)
	}
}
