// Package charts draws the benchmark's SVG charts from its report document
// (gonum.org/v1/plot): throughput against workers with the bare-Raft
// ceiling, latency CDFs, and the cost-growth curves of workload 9.
package charts

import (
	"cmp"
	"fmt"
	"image/color"
	"math"
	"path/filepath"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/raftlock/raftlock/bench/internal/report"
)

// colours of the systems (and of the ceilings), stable across charts.
var colours = map[string]color.RGBA{
	"etcd":           {R: 0x41, G: 0x6f, B: 0xb8, A: 0xff},
	"raftlock":       {R: 0xd9, G: 0x5f, B: 0x02, A: 0xff},
	"raftlock-wal":   {R: 0x1b, G: 0x9e, B: 0x77, A: 0xff},
	"raftlock-hb1s":  {R: 0x75, G: 0x70, B: 0xb3, A: 0xff},
	"raft-floor":     {R: 0xe7, G: 0x29, B: 0x8a, A: 0xff},
	"raft-floor-wal": {R: 0x66, G: 0xa6, B: 0x1e, A: 0xff},
	"ceiling bolt":   {R: 0x80, G: 0x80, B: 0x80, A: 0xff},
	"ceiling wal":    {R: 0xb0, G: 0xb0, B: 0xb0, A: 0xff},
	"bare raft (÷2)": {R: 0x80, G: 0x80, B: 0x80, A: 0xff},
}

func colour(name string) color.Color {
	if c, ok := colours[name]; ok {
		return c
	}
	return color.Black
}

// Write draws every chart the document has data for next to base (the JSON
// path without .json): base-throughput.svg, base-latency.svg,
// base-growth.svg. It returns the files written.
func Write(base string, doc *report.Document, growth Growth) ([]string, error) {
	var out []string
	for _, c := range []struct {
		suffix string
		draw   func() (*plot.Plot, vg.Length, vg.Length, error)
	}{
		{"-throughput.svg", func() (*plot.Plot, vg.Length, vg.Length, error) { return throughput(doc) }},
		{"-latency.svg", func() (*plot.Plot, vg.Length, vg.Length, error) { return latency(doc) }},
		{"-growth.svg", func() (*plot.Plot, vg.Length, vg.Length, error) { return growth.plot(doc) }},
	} {
		p, w, h, err := c.draw()
		if err != nil {
			return out, err
		}
		if p == nil {
			continue
		}
		path := base + c.suffix
		if err := p.Save(w, h, path); err != nil {
			return out, fmt.Errorf("charts: %s: %w", filepath.Base(path), err)
		}
		out = append(out, path)
	}
	return out, nil
}

// median returns a metric's median for a system.
func median(doc *report.Document, key, system string) (float64, bool) {
	for _, m := range doc.Metrics {
		if m.Key == key {
			v, ok := m.Median[system]
			return v, ok && !math.IsNaN(v)
		}
	}
	return 0, false
}

// systems returns the systems with a value in any metric, etcd first.
func systems(doc *report.Document) []string {
	var out []string
	for _, s := range report.Systems {
		for _, m := range doc.Metrics {
			if _, ok := m.Median[s]; ok {
				out = append(out, s)
				break
			}
		}
	}
	return out
}

// line adds a line with points to p.
func line(p *plot.Plot, name string, xys plotter.XYs, dashed bool) error {
	l, s, err := plotter.NewLinePoints(xys)
	if err != nil {
		return err
	}
	l.Color, s.Color = colour(name), colour(name)
	l.Width = vg.Points(1.5)
	if dashed {
		l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	}
	p.Add(l, s)
	p.Legend.Add(name, l, s)
	return nil
}

// throughput: Lock+Unlock/s against workers (1 in a follower's process,
// 16, 64), each system, with the bare-Raft ceiling of the same run.
func throughput(doc *report.Document) (*plot.Plot, vg.Length, vg.Length, error) {
	points := []struct {
		workers float64
		key     string
	}{{1, "uncontended.ops_per_s"}, {16, "distinct16.ops_per_s"}, {64, "distinct64.ops_per_s"}}
	p := plot.New()
	p.Title.Text = "Lock+Unlock/s against workers (1: in a follower's process)"
	p.X.Label.Text = "workers"
	p.Y.Label.Text = "Lock+Unlock/s"
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.X.Tick.Marker, p.Y.Tick.Marker = plot.LogTicks{Prec: -1}, plot.LogTicks{Prec: -1}
	p.Legend.Top, p.Legend.Left = true, true
	drawn := false
	for _, sys := range systems(doc) {
		var xys plotter.XYs
		for _, pt := range points {
			if v, ok := median(doc, pt.key, sys); ok && v > 0 {
				xys = append(xys, plotter.XY{X: pt.workers, Y: v})
			}
		}
		if len(xys) < 2 {
			continue
		}
		if err := line(p, sys, xys, false); err != nil {
			return nil, 0, 0, err
		}
		drawn = true
	}
	if doc.Limits != nil {
		for _, store := range []string{"bolt", "wal"} {
			var xys plotter.XYs
			for _, r := range doc.Limits.BareRaft {
				if r.Store == store && r.CommitsPerSec > 0 {
					xys = append(xys, plotter.XY{X: float64(r.Appliers), Y: r.CommitsPerSec / 2})
				}
			}
			if len(xys) >= 2 {
				if err := line(p, "ceiling "+store, xys, true); err != nil {
					return nil, 0, 0, err
				}
			}
			xys = nil
			for _, r := range report.BestBatched(doc.Limits.Batched, store) {
				if r.CommandsPerSec > 0 {
					xys = append(xys, plotter.XY{X: float64(r.Workers), Y: r.CommandsPerSec / 2})
				}
			}
			if len(xys) >= 2 {
				if err := line(p, "ideal group commit "+store, xys, true); err != nil {
					return nil, 0, 0, err
				}
			}
		}
	}
	if !drawn {
		return nil, 0, 0, nil
	}
	return p, 16 * vg.Centimeter, 11 * vg.Centimeter, nil
}

// latency: the CDF of each distribution the document has, one panel per
// workload stacked vertically (x: ms, log scale; y: percent of operations).
func latency(doc *report.Document) (*plot.Plot, vg.Length, vg.Length, error) {
	if len(doc.CDFs) == 0 {
		return nil, 0, 0, nil
	}
	p := plot.New()
	p.Title.Text = "Latency CDFs (Lock call → Unlock return; handoffs: Unlock call → next grant)"
	p.X.Label.Text = "ms"
	p.Y.Label.Text = "% of operations at most"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Legend.Top, p.Legend.Left = true, true
	var names []string
	for _, cs := range doc.CDFs {
		for _, c := range cs {
			if !slices.Contains(names, c.Name) {
				names = append(names, c.Name)
			}
		}
	}
	dashes := [][]vg.Length{nil, {vg.Points(5), vg.Points(2)}, {vg.Points(1), vg.Points(2)}, {vg.Points(6), vg.Points(2), vg.Points(1), vg.Points(2)}}
	for _, sys := range systems(doc) {
		for i, name := range names {
			c, ok := medianCDF(doc.CDFs[sys], name)
			if !ok {
				continue
			}
			var xys plotter.XYs
			for k := range c.P {
				if c.MS[k] > 0 {
					xys = append(xys, plotter.XY{X: c.MS[k], Y: c.P[k]})
				}
			}
			l, err := plotter.NewLine(xys)
			if err != nil {
				return nil, 0, 0, err
			}
			l.Color, l.Width = colour(sys), vg.Points(1.2)
			l.Dashes = dashes[i%len(dashes)]
			p.Add(l)
			p.Legend.Add(sys+": "+name, l)
		}
	}
	return p, 18 * vg.Centimeter, 13 * vg.Centimeter, nil
}

// medianCDF returns, of a system's runs of the named distribution, the one
// with the median p50.
func medianCDF(cs []report.CDF, name string) (report.CDF, bool) {
	var runs []report.CDF
	for _, c := range cs {
		if c.Name == name && len(c.MS) >= 50 {
			runs = append(runs, c)
		}
	}
	if len(runs) == 0 {
		return report.CDF{}, false
	}
	slices.SortFunc(runs, func(a, b report.CDF) int { return cmp.Compare(a.MS[49], b.MS[49]) })
	return runs[len(runs)/2], true
}

// Growth describes the cost-growth chart: the lock counts of the sizes and,
// per series, its metric keys at those sizes.
type Growth struct {
	Locks  []float64
	Series []report.GrowthSeries
}

// plot: one log-log line per (system, series) against the lock count.
func (g Growth) plot(doc *report.Document) (*plot.Plot, vg.Length, vg.Length, error) {
	if len(g.Locks) < 2 {
		return nil, 0, 0, nil
	}
	p := plot.New()
	p.Title.Text = "Cost growth against locks held (sessions ×10 with locks)"
	p.X.Label.Text = "locks held"
	p.Y.Label.Text = "value (unit in the legend)"
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.X.Tick.Marker, p.Y.Tick.Marker = plot.LogTicks{Prec: -1}, plot.LogTicks{Prec: -1}
	p.Legend.Top, p.Legend.Left = true, true
	drawn := false
	shapes := [][]vg.Length{nil, {vg.Points(5), vg.Points(2)}, {vg.Points(1), vg.Points(2)}, {vg.Points(6), vg.Points(2), vg.Points(1), vg.Points(2)}, {vg.Points(3), vg.Points(3)}}
	for _, sys := range systems(doc) {
		for i, s := range g.Series {
			var xys plotter.XYs
			for k, key := range s.Keys {
				if v, ok := median(doc, key, sys); ok && v > 0 {
					xys = append(xys, plotter.XY{X: g.Locks[k], Y: v})
				}
			}
			if len(xys) < 2 {
				continue
			}
			l, pts, err := plotter.NewLinePoints(xys)
			if err != nil {
				return nil, 0, 0, err
			}
			l.Color, pts.Color = colour(sys), colour(sys)
			l.Dashes = shapes[i%len(shapes)]
			p.Add(l, pts)
			p.Legend.Add(fmt.Sprintf("%s: %s (%s)", sys, strings.ToLower(s.Name), s.Unit), l, pts)
			drawn = true
		}
	}
	if !drawn {
		return nil, 0, 0, nil
	}
	return p, 18 * vg.Centimeter, 14 * vg.Centimeter, nil
}
