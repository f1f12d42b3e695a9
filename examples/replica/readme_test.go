package main

import (
	"bytes"
	"context"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

var (
	usageFlag = regexp.MustCompile(`(?m)^  -(\S+) \((\S+)\)$`)
	codeSpans = regexp.MustCompile("`([^`]+)`")
)

// flagTable returns the flags of the "Flags and environment" table of a
// Markdown text and, for each, the variable the table gives it. A row may
// name several flags and abbreviate their variables after the first
// (`RAFTLOCK_TLS_CA`, `_CERT`, `_KEY`: the first's last part replaced).
// problems lists rows whose flags and variables do not pair up.
func flagTable(md string) (vars map[string]string, order []string, problems []string) {
	vars = map[string]string{}
	_, table, ok := strings.Cut(md, "### Flags and environment")
	if !ok {
		return vars, nil, []string{`no "### Flags and environment" section`}
	}
	for _, line := range strings.Split(table, "\n") {
		if strings.HasPrefix(line, "#") {
			break
		}
		cells := strings.Split(line, "|")
		if len(cells) < 4 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`-") {
			continue
		}
		var flags, envs []string
		for _, m := range codeSpans.FindAllStringSubmatch(cells[1], -1) {
			flags = append(flags, strings.TrimPrefix(m[1], "-"))
		}
		for _, m := range codeSpans.FindAllStringSubmatch(cells[2], -1) {
			v := m[1]
			if strings.HasPrefix(v, "_") && len(envs) > 0 {
				first := envs[0]
				v = first[:strings.LastIndex(first, "_")] + v
			}
			envs = append(envs, v)
		}
		if len(flags) != len(envs) {
			problems = append(problems, "row "+strings.TrimSpace(line)+": flags and variables do not pair up")
			continue
		}
		for i, f := range flags {
			vars[f] = envs[i]
			order = append(order, f)
		}
	}
	return vars, order, problems
}

// TestREADMEFlagTable: examples/README.md's table of the replica's flags
// lists every flag the replica has, each once, with the environment
// variable that sets it, and no flag it does not have (issue 48: the table
// lacked -allow-plaintext, -log-store, -recover and -timing fast).
func TestREADMEFlagTable(t *testing.T) {
	var usage bytes.Buffer
	if err := run(context.Background(), []string{"-h"}, envOf(nil), &usage); err != nil {
		t.Fatal(err)
	}
	have := map[string]string{}
	for _, m := range usageFlag.FindAllStringSubmatch(usage.String(), -1) {
		have[m[1]] = m[2]
	}
	if len(have) < 20 {
		t.Fatalf("read %d flags from the usage, want them all:\n%s", len(have), usage.String())
	}
	md, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range flagTableMismatches(string(md), have) {
		t.Error(p)
	}
}

// flagTableMismatches compares the table of md with the flags the replica
// has (flag → variable) and says what differs.
func flagTableMismatches(md string, have map[string]string) []string {
	table, order, problems := flagTable(md)
	for f, env := range have {
		switch got, ok := table[f]; {
		case !ok:
			problems = append(problems, "examples/README.md's flag table lacks -"+f+" ("+env+")")
		case got != env:
			problems = append(problems, "examples/README.md's flag table gives -"+f+" the variable "+got+", want "+env)
		}
	}
	for _, f := range order {
		if _, ok := have[f]; !ok {
			problems = append(problems, "examples/README.md's flag table lists -"+f+", which the replica does not have")
		}
	}
	slices.Sort(order)
	if d := len(order) - len(slices.Compact(order)); d > 0 {
		problems = append(problems, "examples/README.md's flag table lists a flag twice")
	}
	slices.Sort(problems)
	return problems
}

// TestFlagTableMismatches: the comparison reports a missing flag, a wrong
// variable, an unknown flag and a repeated one, and expands abbreviated
// variables (so that TestREADMEFlagTable can fail).
func TestFlagTableMismatches(t *testing.T) {
	have := map[string]string{"id": "RAFTLOCK_ID", "tls-ca": "RAFTLOCK_TLS_CA", "tls-cert": "RAFTLOCK_TLS_CERT", "recover": "RAFTLOCK_RECOVER"}
	good := "### Flags and environment\n\n| flag | variable |\n|---|---|\n" +
		"| `-id` | `RAFTLOCK_ID` | — | id |\n" +
		"| `-tls-ca`, `-tls-cert` | `RAFTLOCK_TLS_CA`, `_CERT` | — | PEM |\n" +
		"| `-recover` | `RAFTLOCK_RECOVER` | `false` | recovery |\n\n## next\n| `-bogus` | `X` | | |\n"
	if got := flagTableMismatches(good, have); len(got) != 0 {
		t.Errorf("a complete table: %q", got)
	}
	bad := "### Flags and environment\n\n" +
		"| `-id` | `RAFTLOCK_IDENT` | — | id |\n" +
		"| `-tls-ca`, `-tls-cert` | `RAFTLOCK_TLS_CA`, `_CERT` | — | PEM |\n" +
		"| `-tls-ca` | `RAFTLOCK_TLS_CA` | — | again |\n" +
		"| `-old` | `RAFTLOCK_OLD` | — | gone |\n"
	want := []string{
		"examples/README.md's flag table gives -id the variable RAFTLOCK_IDENT, want RAFTLOCK_ID",
		"examples/README.md's flag table lacks -recover (RAFTLOCK_RECOVER)",
		"examples/README.md's flag table lists -old, which the replica does not have",
		"examples/README.md's flag table lists a flag twice",
	}
	slices.Sort(want)
	if got := flagTableMismatches(bad, have); !slices.Equal(got, want) {
		t.Errorf("mismatches:\n got %q\nwant %q", got, want)
	}
}
