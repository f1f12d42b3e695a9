package report

import (
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Systems are the table's value columns, in order; Ratio is the last column.
var Systems = []string{"etcd", "raftlock"}

// RatioNum and RatioDen name the ratio column's systems.
const (
	RatioNum = "raftlock"
	RatioDen = "etcd"
)

// WriteTable writes the metrics as a markdown table: one row per metric,
// grouped by workload, with each system's median over runs (and the run
// count when more than one) and the raftlock/etcd ratio of the medians.
func WriteTable(w io.Writer, metrics []*Metric) error {
	var b strings.Builder
	b.WriteString("| workload | metric |")
	for _, s := range Systems {
		b.WriteString(" " + s + " |")
	}
	fmt.Fprintf(&b, " %s/%s |\n|---|---|", RatioNum, RatioDen)
	for range Systems {
		b.WriteString("--:|")
	}
	b.WriteString("--:|\n")
	last := ""
	for _, m := range metrics {
		if m.Hidden {
			continue
		}
		group := ""
		if m.Workload != last {
			group, last = m.Workload, m.Workload
		}
		name := m.Name
		if m.Unit != "" {
			name += " (" + m.Unit + ")"
		}
		fmt.Fprintf(&b, "| %s | %s |", group, name)
		for _, s := range Systems {
			b.WriteString(" " + cell(m, s) + " |")
		}
		ratio := "n/a"
		if r, ok := m.Ratio(RatioNum, RatioDen); ok {
			ratio = FormatNumber(r, 2) + "×"
			if r != 1 && (r > 1) == m.Higher {
				ratio += " ✓" // raftlock is better
			}
		}
		b.WriteString(" " + ratio + " |\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// cell formats a system's median, with the number of runs when several.
func cell(m *Metric, system string) string {
	v, ok := m.Median(system)
	if !ok {
		return "n/a"
	}
	s := FormatNumber(v, m.Digits)
	if n := len(m.Runs[system]); n > 1 {
		s += fmt.Sprintf(" (n=%d)", n)
	}
	return s
}

// FormatNumber formats v with the given decimals and thousands separators.
func FormatNumber(v float64, digits int) string {
	s := strconv.FormatFloat(v, 'f', digits, 64)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	intPart, frac, hasFrac := strings.Cut(s, ".")
	var b strings.Builder
	for i, r := range intPart {
		if i > 0 && (len(intPart)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	out := b.String()
	if hasFrac {
		out += "." + frac
	}
	if neg {
		out = "-" + out
	}
	return out
}
