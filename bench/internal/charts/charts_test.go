package charts

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/raftlock/raftlock/bench/internal/report"
)

func TestWrite(t *testing.T) {
	var c report.Collector
	for _, s := range []struct {
		sys string
		f   float64
	}{{"etcd", 1}, {"raftlock", 3}} {
		c.Add(s.sys, []report.Sample{
			{Def: report.Def{Key: "uncontended.ops_per_s"}, Value: 300 * s.f},
			{Def: report.Def{Key: "distinct16.ops_per_s"}, Value: 1000 * s.f},
			{Def: report.Def{Key: "distinct64.ops_per_s"}, Value: 2000 * s.f},
			{Def: report.Def{Key: "g.10k"}, Value: 10 * s.f},
			{Def: report.Def{Key: "g.100k"}, Value: 90 * s.f},
		})
	}
	p := []float64{}
	ms := []float64{}
	for q := 1; q <= 100; q++ {
		p, ms = append(p, float64(q)), append(ms, float64(q)/10)
	}
	doc := &report.Document{
		Metrics: report.MetricsJSON(c.Metrics()),
		Limits:  &report.Limits{BareRaft: []report.RaftLimit{{Store: "bolt", Appliers: 1, CommitsPerSec: 800}, {Store: "bolt", Appliers: 16, CommitsPerSec: 4000}}},
		CDFs:    map[string][]report.CDF{"raftlock": {{Name: "1 worker", P: p, MS: ms}}},
	}
	base := filepath.Join(t.TempDir(), "latest")
	files, err := Write(base, doc, Growth{Locks: []float64{1e4, 1e5}, Series: []report.GrowthSeries{{Name: "RSS", Unit: "MiB", Keys: []string{"g.10k", "g.100k"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 3 {
		t.Fatalf("wrote %v, want three charts", files)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(b), "<?xml") || !strings.Contains(string(b), "raftlock") {
			t.Errorf("%s: not an SVG naming the systems (%d bytes)", f, len(b))
		}
	}
	// Nothing to draw: no file.
	files, err = Write(base+"-empty", &report.Document{}, Growth{})
	if err != nil || len(files) != 0 {
		t.Fatalf("empty document: %v %v", files, err)
	}
}
