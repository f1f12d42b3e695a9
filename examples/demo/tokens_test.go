//go:build unix

package main

import "testing"

// Tokens are shown relative to the first one shown (T), which is printed
// once in full: a 16-digit number per line was unreadable.
func TestTokenNames(t *testing.T) {
	var tn tokenNames
	for _, tc := range []struct {
		token uint64
		want  string
		first bool
	}{
		{1796683538243890, "T", true},
		{1796683538243928, "T+38", false},
		{1796683538243890, "T", false},
		{1796683538243888, "T-2", false},
		{0, "0 (none)", false},
	} {
		if got, first := tn.name(tc.token); got != tc.want || first != tc.first {
			t.Errorf("name(%d) = %q, %v; want %q, %v", tc.token, got, first, tc.want, tc.first)
		}
	}
	n := &narrator{}
	if got, want := n.tok(1796683538243890), "T = 1796683538243890 (tokens are 16-digit numbers; the others are shown as T+n: a new leader raises the counter to its clock in µs, hence the jumps)"; got != want {
		t.Errorf("first tok = %q, want %q", got, want)
	}
	if got := n.tok(1796683538244000); got != "T+110" {
		t.Errorf("second tok = %q, want T+110", got)
	}
}
