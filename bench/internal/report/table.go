package report

import (
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Systems are the table's value columns, in order (those with a value in
// some metric); every system after the first also has a ratio column
// against RatioDen.
var Systems = []string{"etcd", "raftlock", "raftlock-wal", "raftlock-hb1s", "raft-floor", "raft-floor-wal"}

// RatioNum and RatioDen name the main ratio's systems (JSON's ratio).
const (
	RatioNum = "raftlock"
	RatioDen = "etcd"
)

// WriteTable writes the metrics as a markdown table: one row per metric,
// grouped by workload, with each system's median over runs (and the run
// count when more than one) and the ratio of each system's median to etcd's.
func WriteTable(w io.Writer, metrics []*Metric) error {
	systems := present(metrics)
	var b strings.Builder
	b.WriteString("| workload | metric |")
	for _, s := range systems {
		b.WriteString(" " + s + " |")
	}
	for _, s := range systems {
		if s != RatioDen {
			fmt.Fprintf(&b, " %s/%s |", s, RatioDen)
		}
	}
	b.WriteString("\n|---|---|")
	for _, s := range systems {
		b.WriteString("--:|")
		if s != RatioDen {
			b.WriteString("--:|")
		}
	}
	b.WriteString("\n")
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
		for _, s := range systems {
			b.WriteString(" " + cell(m, s) + " |")
		}
		for _, s := range systems {
			if s != RatioDen {
				b.WriteString(" " + ratioCell(m, s) + " |")
			}
		}
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// present returns the systems of Systems that have a value in some metric,
// etcd always first.
func present(metrics []*Metric) []string {
	out := []string{RatioDen}
	for _, s := range Systems[1:] {
		for _, m := range metrics {
			if len(m.Runs[s]) > 0 {
				out = append(out, s)
				break
			}
		}
	}
	return out
}

// ratioCell formats median(system)/median(etcd), ✓ where system is better.
func ratioCell(m *Metric, system string) string {
	r, ok := m.Ratio(system, RatioDen)
	if !ok {
		return "n/a"
	}
	s := FormatNumber(r, 2) + "×"
	if r != 1 && (r > 1) == m.Higher {
		s += " ✓"
	}
	return s
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
	neg := strings.HasPrefix(s, "-") && strings.Trim(s, "-0.") != "" // no "-0"
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
