package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"
)

// emit prints v as indented JSON with -o json; otherwise table prints it
// for people.
func (e *env) emit(v any, table func(t *tabwriter.Writer)) error {
	if e.g.output == "json" {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	t := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	table(t)
	return t.Flush()
}

// row writes one tab-separated table row.
func row(t *tabwriter.Writer, cells ...any) {
	s := make([]string, len(cells))
	for i, c := range cells {
		s[i] = fmt.Sprint(c)
		if s[i] == "" {
			s[i] = "-"
		}
	}
	fmt.Fprintln(t, strings.Join(s, "\t"))
}

// ms formats milliseconds as a duration ("-" when unknown).
func ms(p *int64) string {
	if p == nil {
		return "-"
	}
	return (time.Duration(*p) * time.Millisecond).Round(10 * time.Millisecond).String()
}

// ago formats a Unix time in milliseconds as the time since then.
func ago(unixMS int64) string {
	if unixMS == 0 {
		return "-"
	}
	return time.Since(time.UnixMilli(unixMS)).Round(time.Second).String() + " ago"
}

func yes(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func jsonInto(b []byte, v any) error { return json.Unmarshal(b, v) }
