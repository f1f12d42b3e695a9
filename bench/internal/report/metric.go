// Package report aggregates the benchmark's samples into metrics (medians over
// runs, per system, with the raftlock/etcd ratio) and renders them as a
// markdown table and a JSON document.
package report

import (
	"math"

	"github.com/raftlock/raftlock/bench/internal/stats"
)

// Def describes one metric.
type Def struct {
	Key      string `json:"key"`      // stable identifier, e.g. "distinct16.ops_per_s"
	Workload string `json:"workload"` // table group, e.g. "2. 16 workers, distinct locks"
	Name     string `json:"name"`     // e.g. "Lock+Unlock/s"
	Unit     string `json:"unit,omitempty"`
	Higher   bool   `json:"higher_is_better"`
	Digits   int    `json:"-"`                // decimals in the table
	Hidden   bool   `json:"hidden,omitempty"` // JSON only (diagnostics)
}

// Sample is one run's value of a metric.
type Sample struct {
	Def   Def
	Value float64
}

// Metric is every run's value of one metric, per system.
type Metric struct {
	Def
	Runs map[string][]float64 `json:"runs"` // system → one value per run
}

// Median returns the median over the system's runs.
func (m *Metric) Median(system string) (float64, bool) {
	v := m.Runs[system]
	if len(v) == 0 {
		return 0, false
	}
	return stats.Median(v), true
}

// Ratio returns median(num)/median(den), when both exist and den is not zero.
func (m *Metric) Ratio(num, den string) (float64, bool) {
	a, ok1 := m.Median(num)
	b, ok2 := m.Median(den)
	if !ok1 || !ok2 || b == 0 || math.IsNaN(a) || math.IsNaN(b) {
		return 0, false
	}
	return a / b, true
}

// Collector gathers samples in the order metrics first appear.
type Collector struct {
	metrics []*Metric
	byKey   map[string]*Metric
}

// Add records one run's samples for a system. NaN values are dropped.
func (c *Collector) Add(system string, samples []Sample) {
	if c.byKey == nil {
		c.byKey = map[string]*Metric{}
	}
	for _, s := range samples {
		m, ok := c.byKey[s.Def.Key]
		if !ok {
			m = &Metric{Def: s.Def, Runs: map[string][]float64{}}
			c.byKey[s.Def.Key] = m
			c.metrics = append(c.metrics, m)
		}
		if !math.IsNaN(s.Value) && !math.IsInf(s.Value, 0) {
			m.Runs[system] = append(m.Runs[system], s.Value)
		}
	}
}

// Metrics returns the metrics in first-appearance order.
func (c *Collector) Metrics() []*Metric { return c.metrics }

// CDF is a latency distribution of one run: P[i] percent of the
// operations took at most MS[i] milliseconds.
type CDF struct {
	Name string    `json:"name"`
	P    []float64 `json:"p"`
	MS   []float64 `json:"ms"`
}
