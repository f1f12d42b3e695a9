package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/raftlock/raftlock/internal/textsafe"
)

// emit prints v as indented JSON with -o json; otherwise table prints it
// for people. What the API answers (names, descriptions, reasons) is text
// anyone with the lock role chose: neither form lets its control
// characters reach the terminal (textsafe).
func (e *env) emit(v any, table func(t *tabwriter.Writer)) error {
	if e.g.output == "json" {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetIndent("", "  ")
		if err := enc.Encode(v); err != nil {
			return err
		}
		_, err := e.stdout.Write(textsafe.EscapeJSON(buf.Bytes()))
		return err
	}
	t := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	table(t)
	return t.Flush()
}

// row writes one tab-separated table row, each cell as shown (its control
// characters, tabs included, escaped).
func row(t *tabwriter.Writer, cells ...any) {
	s := make([]string, len(cells))
	for i, c := range cells {
		s[i] = shown(c)
		if s[i] == "" {
			s[i] = "-"
		}
	}
	fmt.Fprintln(t, strings.Join(s, "\t"))
}

// shown formats v for the terminal: as it is, or quoted with its control
// and bidirectional formatting characters escaped (textsafe.Display).
func shown(v any) string { return textsafe.Display(fmt.Sprint(v)) }

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
