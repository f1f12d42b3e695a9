package limits

import (
	"strings"
	"testing"
	"time"

	"github.com/raftlock/raftlock/bench/internal/report"
)

// FsyncRates reports a positive rate per writer for each writer count, in
// order, and WriteLimits prints them.
func TestFsyncRates(t *testing.T) {
	r, err := FsyncRates(t.TempDir(), []int{1, 2}, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if len(r) != 2 || r[0].Writers != 1 || r[1].Writers != 2 || r[0].PerWriter <= 0 || r[1].PerWriter <= 0 {
		t.Fatalf("rates %+v", r)
	}
	var b strings.Builder
	report.WriteLimits(&b, &report.Limits{FsyncRates: r})
	if !strings.Contains(b.String(), "1 writer(s)") || !strings.Contains(b.String(), "; 2 writer(s)") {
		t.Fatalf("limits text %q", b.String())
	}
}
