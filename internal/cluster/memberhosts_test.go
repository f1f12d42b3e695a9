package cluster

import (
	"maps"
	"slices"
	"testing"
)

func TestMemberHostSet(t *testing.T) {
	resolve := func(name string) []string {
		if name == "node-a.internal" {
			return []string{"10.0.0.7", "fd00::7"}
		}
		return nil
	}
	for _, tc := range []struct {
		name       string
		addrs      []string
		resolvable map[string]bool
		resolve    func(string) []string
		want       []string
	}{
		{"IPs", []string{"10.0.0.1:7400", "[2001:db8::1]:7400", "10.0.0.1:7401"}, nil, nil, []string{"10.0.0.1", "2001:db8::1"}},
		{"IPv4-mapped", []string{"[::ffff:10.0.0.2]:7400"}, nil, nil, []string{"10.0.0.2"}},
		{"bare hosts", []string{"10.0.0.3", "n1"}, nil, nil, []string{"10.0.0.3", "n1"}},
		{"names kept, resolved when trusted", []string{"Node-A.internal:7400"}, map[string]bool{"Node-A.internal:7400": true}, resolve, []string{"node-a.internal", "10.0.0.7", "fd00::7"}},
		{"untrusted names not resolved", []string{"node-a.internal:7400"}, nil, resolve, []string{"node-a.internal"}},
		{"empty host skipped", []string{":7400", ""}, nil, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := slices.Sorted(maps.Keys(memberHostSet(tc.addrs, tc.resolvable, tc.resolve)))
			want := slices.Sorted(slices.Values(tc.want))
			if !slices.Equal(got, want) {
				t.Fatalf("memberHostSet(%q) = %q, want %q", tc.addrs, got, want)
			}
		})
	}
}
