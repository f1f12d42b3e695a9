//go:build unix

package main

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

var (
	excerptTime    = regexp.MustCompile(`^\[\s*\d+\.\d+s\] `)
	excerptToken   = regexp.MustCompile(`\b\d{10,}\b|\bT[+-]\d+\b`)
	excerptSecs    = regexp.MustCompile(`\b\d+\.\d+s\b`)
	excerptReplica = regexp.MustCompile(`\br\d\b`)
)

// normalizeDemoLine drops what changes from run to run in a line of the
// demo's output — its time, tokens (T+n, or 16-digit numbers), measured durations
// (with a decimal point) and replica names — and keeps the rest: the
// wording, the TTL and the phases' set durations.
func normalizeDemoLine(l string) string {
	l = excerptTime.ReplaceAllString(strings.TrimRight(l, " "), "")
	l = excerptToken.ReplaceAllString(l, "TOKEN")
	l = excerptSecs.ReplaceAllString(l, "SECS")
	return excerptReplica.ReplaceAllString(l, "rN")
}

// excerptMismatches returns the lines of the excerpt of a run in the
// Markdown text readme (the first fenced block after "An excerpt of a
// run") that the demo's output does not print, each compared as
// normalizeDemoLine leaves it.
func excerptMismatches(readme, output string) []string {
	_, rest, ok := strings.Cut(readme, "An excerpt of a run")
	if !ok {
		return []string{`no "An excerpt of a run" in the README`}
	}
	_, rest, ok = strings.Cut(rest, "```\n")
	block, _, closed := strings.Cut(rest, "```")
	if !ok || !closed {
		return []string{"no fenced block after the excerpt's heading"}
	}
	var printed []string
	for _, l := range strings.Split(output, "\n") {
		printed = append(printed, normalizeDemoLine(l))
	}
	var missing []string
	for _, l := range strings.Split(block, "\n") {
		if strings.TrimSpace(l) != "" && !slices.Contains(printed, normalizeDemoLine(l)) {
			missing = append(missing, l)
		}
	}
	return missing
}

// checkREADMEExcerpt: the excerpt of a run in examples/README.md is what
// the demo prints (issue 48: it showed tokens 137 and 175 and a TTL of 3 s
// after the tokens had become 16-digit numbers and the TTL 5 s).
func checkREADMEExcerpt(t *testing.T, output string) {
	t.Helper()
	md, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range excerptMismatches(string(md), output) {
		t.Errorf("examples/README.md's excerpt of a run has a line the demo does not print: %s", l)
	}
}

// TestExcerptMismatches: a line whose tokens, TTL or wording differ from
// the output is reported; one that differs only in time, tokens, measured
// durations and replica names is not (so that checkREADMEExcerpt can fail).
func TestExcerptMismatches(t *testing.T) {
	output := "── 2. A frozen lock holder and the fence ──\n" +
		"[  6.6s] SIGSTOP r1: frozen mid-render, like a long GC pause; its session TTL is 5s\n" +
		"[ 11.4s] r2 is granted doc:42 after 4.82s (r1's session expired on the cluster): token 1796681488264965 > 1796681488264881; it publishes\n"
	good := "An excerpt of a run:\n\n```\n── 2. A frozen lock holder and the fence ──\n" +
		"[  5.7s] SIGSTOP r3: frozen mid-render, like a long GC pause; its session TTL is 5s\n" +
		"[  9.9s] r1 is granted doc:42 after 2.18s (r3's session expired on the cluster): token 1796681500915279 > 1796681500915270; it publishes\n```\n"
	if got := excerptMismatches(good, output); len(got) != 0 {
		t.Errorf("an excerpt of the same output: %q", got)
	}
	bad := "An excerpt of a run:\n\n```\n── 2. A frozen lock holder and the fence ──\n" +
		"[  5.7s] SIGSTOP r1: frozen mid-render, like a long GC pause; its session TTL is 3s\n" +
		"[  7.9s] r2 is granted doc:42 after 2.18s (r1's session expired on the cluster): token 175 > 137; it publishes\n```\n"
	want := []string{
		"[  5.7s] SIGSTOP r1: frozen mid-render, like a long GC pause; its session TTL is 3s",
		"[  7.9s] r2 is granted doc:42 after 2.18s (r1's session expired on the cluster): token 175 > 137; it publishes",
	}
	if got := excerptMismatches(bad, output); !slices.Equal(got, want) {
		t.Errorf("an outdated excerpt:\n got %q\nwant %q", got, want)
	}
	if got := excerptMismatches("no excerpt here", output); len(got) != 1 {
		t.Errorf("a README without an excerpt: %q", got)
	}
}
