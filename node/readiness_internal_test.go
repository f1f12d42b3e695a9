package node

import "testing"

func TestNotReadyReason(t *testing.T) {
	member := []Server{{ID: "n1", Role: RoleVoter}}
	for _, c := range []struct {
		name string
		st   Status
		want string
	}{
		{"joiner alone", Status{GossipErr: "no seed reachable: tried 10.0.0.2:7946 (connection refused)"},
			"in no cluster yet; gossip: no seed reachable: tried 10.0.0.2:7946 (connection refused)"},
		{"founding", Status{Formation: "waiting for 3 founders, 1 seen"}, "in no cluster yet: waiting for 3 founders, 1 seen"},
		{"no leader", Status{Servers: member}, "no leader known (an election, or no quorum)"},
		{"catching up", Status{Servers: member, LeaderID: "n1"}, "catching up with the leader's log"},
		{"id conflict", Status{Servers: member, LeaderID: "n1", GossipErr: "another member uses id n2"},
			"catching up with the leader's log; gossip: another member uses id n2"},
	} {
		if got := notReadyReason(c.st); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}
