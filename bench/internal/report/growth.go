package report

import (
	"fmt"
	"io"
	"math"
	"strings"
)

// GrowthSeries is one quantity of the cost-growth table: its metric key at
// each size.
type GrowthSeries struct {
	Name   string
	Unit   string
	Digits int
	Keys   []string // one per size, in the order of the sizes
}

// WriteGrowth writes, for every system with values, the cost-growth table:
// one row per size (labelled by sizes), one column per series (the
// system's median), and a last row with each series' growth exponent
// against xs (the least-squares slope of log value on log x: 1 is linear).
func WriteGrowth(w io.Writer, metrics []*Metric, sizes []string, xs []float64, series []GrowthSeries) {
	byKey := map[string]*Metric{}
	for _, m := range metrics {
		byKey[m.Key] = m
	}
	for _, sys := range present(metrics) {
		var b strings.Builder
		rows := 0
		fmt.Fprintf(&b, "%s:\n\n| sessions / locks |", sys)
		for _, s := range series {
			fmt.Fprintf(&b, " %s (%s) |", s.Name, s.Unit)
		}
		b.WriteString("\n|---|" + strings.Repeat("--:|", len(series)) + "\n")
		ys := make([][]float64, len(series))
		px := make([][]float64, len(series))
		for i, label := range sizes {
			line := "| " + label + " |"
			any := false
			for j, s := range series {
				v, ok := 0.0, false
				if m := byKey[s.Keys[i]]; m != nil {
					v, ok = m.Median(sys)
				}
				if !ok {
					line += " n/a |"
					continue
				}
				any = true
				line += " " + FormatNumber(v, s.Digits) + " |"
				ys[j] = append(ys[j], v)
				px[j] = append(px[j], xs[i])
			}
			if any {
				b.WriteString(line + "\n")
				rows++
			}
		}
		if rows == 0 {
			continue
		}
		b.WriteString("| growth exponent |")
		for j := range series {
			if e, ok := GrowthExponent(px[j], ys[j]); ok {
				b.WriteString(" " + FormatNumber(e, 2) + " |")
			} else {
				b.WriteString(" n/a |")
			}
		}
		b.WriteString("\n\n")
		io.WriteString(w, b.String())
	}
}

// GrowthExponent is the least-squares slope of log y on log x over the
// points with x, y > 0 (at least two distinct x): y ∝ x^slope.
func GrowthExponent(xs, ys []float64) (float64, bool) {
	var lx, ly []float64
	for i := range xs {
		if i < len(ys) && xs[i] > 0 && ys[i] > 0 {
			lx, ly = append(lx, math.Log(xs[i])), append(ly, math.Log(ys[i]))
		}
	}
	if len(lx) < 2 {
		return 0, false
	}
	var mx, my float64
	for i := range lx {
		mx += lx[i]
		my += ly[i]
	}
	mx /= float64(len(lx))
	my /= float64(len(ly))
	var sxy, sxx float64
	for i := range lx {
		sxy += (lx[i] - mx) * (ly[i] - my)
		sxx += (lx[i] - mx) * (lx[i] - mx)
	}
	if sxx == 0 {
		return 0, false
	}
	return sxy / sxx, true
}
