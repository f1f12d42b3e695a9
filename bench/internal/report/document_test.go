package report

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// TestWriteJSON: the document goes to its path (the directory created, no
// .tmp left) as one line of compact JSON that decodes back to it.
func TestWriteJSON(t *testing.T) {
	var c Collector
	c.Add("etcd", []Sample{{Def{Key: "uncontended.ops_per_s", Higher: true}, 200}})
	c.Add("raftlock", []Sample{{Def{Key: "uncontended.ops_per_s", Higher: true}, 300}})
	doc := &Document{Mode: "full", Metrics: MetricsJSON(c.Metrics()), CDFs: map[string][]CDF{}}
	path := filepath.Join(t.TempDir(), "results", "latest.json")
	if err := WriteJSON(path, doc); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(b, []byte("\n")); n != 1 || !bytes.HasSuffix(b, []byte("}\n")) {
		t.Errorf("%d lines, want one compact line:\n%s", n, b)
	}
	if _, err := os.Stat(path + ".tmp"); !os.IsNotExist(err) {
		t.Errorf("%s.tmp left behind (%v)", path, err)
	}
	var got struct {
		Mode    string `json:"mode"`
		Metrics []struct {
			Key    string             `json:"key"`
			Median map[string]float64 `json:"median"`
			Ratio  float64            `json:"ratio_raftlock_over_etcd"`
		} `json:"metrics"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got.Mode != "full" || len(got.Metrics) != 1 || got.Metrics[0].Key != "uncontended.ops_per_s" ||
		got.Metrics[0].Median["raftlock"] != 300 || got.Metrics[0].Ratio != 1.5 {
		t.Errorf("decoded %+v", got)
	}
}
