package report

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

// Document is the JSON file the benchmark writes.
type Document struct {
	Started  time.Time      `json:"started"`
	Elapsed  string         `json:"elapsed"`
	LoadEnd  string         `json:"loadavg_at_end"`
	Mode     string         `json:"mode"` // "quick" or "full"
	Machine  Machine        `json:"machine"`
	Settings map[string]any `json:"settings"`
	Limits   *Limits        `json:"limits,omitempty"`
	Metrics  []MetricJSON   `json:"metrics"`
	Problems []string       `json:"problems,omitempty"`
	// CDFs are each system's latency distributions, one per workload run.
	CDFs map[string][]CDF `json:"cdfs,omitempty"`
}

// MetricJSON is a metric with its medians and ratio worked out.
type MetricJSON struct {
	*Metric
	Median map[string]float64 `json:"median"`
	Ratio  *float64           `json:"ratio_raftlock_over_etcd,omitempty"`
}

// MetricsJSON adds medians and ratios to the metrics.
func MetricsJSON(ms []*Metric) []MetricJSON {
	out := make([]MetricJSON, 0, len(ms))
	for _, m := range ms {
		j := MetricJSON{Metric: m, Median: map[string]float64{}}
		for s := range m.Runs {
			if v, ok := m.Median(s); ok {
				j.Median[s] = v
			}
		}
		if r, ok := m.Ratio(RatioNum, RatioDen); ok {
			j.Ratio = &r
		}
		out = append(out, j)
	}
	return out
}

// WriteJSON writes the document to path atomically (through a .tmp file),
// creating its directory. The JSON is compact, one line (`jq . FILE`
// indents it): a full run's is about 140 KB where indented it was 335 KB,
// which keeps the results committed with the bench small.
func WriteJSON(path string, d *Document) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	b, err := json.Marshal(d)
	if err != nil {
		return fmt.Errorf("report: encode: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// WriteMachine writes the machine description as a markdown list.
func WriteMachine(w io.Writer, m Machine) {
	fmt.Fprintf(w, "- machine: %s, %d cores, %s RAM, Linux %s, %s %s; load average at start %s\n",
		m.CPUModel, m.Cores, m.MemTotal, m.Kernel, m.GoVersion, m.OSArch, m.LoadAvg)
}
