package admin

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/raftlock/raftlock/internal/nodeopts"
	"github.com/raftlock/raftlock/node"
)

func voters(ids ...string) []node.Server {
	var out []node.Server
	for i, id := range ids {
		out = append(out, node.Server{ID: id, Role: node.RoleVoter, Leader: i == 0})
	}
	return out
}

func TestAssess(t *testing.T) {
	now := time.Unix(1000, 0)
	timing := nodeopts.TestTiming()
	healthy := node.Status{ID: "r1", State: "leader", LeaderID: "r1", Ready: true, Servers: voters("r1", "r2", "r3"), CommitIndex: 10, AppliedIndex: 10}
	with := func(f func(*node.Status)) node.Status {
		st := healthy
		st.Servers = slices.Clone(healthy.Servers)
		f(&st)
		return st
	}
	up := func(ids ...string) []node.PeerStatus {
		var out []node.PeerStatus
		for _, id := range []string{"r1", "r2", "r3"} {
			out = append(out, node.PeerStatus{ID: id, Reachable: slices.Contains(ids, id), Err: "connection refused"})
		}
		return out
	}
	for _, tc := range []struct {
		name      string
		st        node.Status
		peers     []node.PeerStatus
		ready     bool
		reason    string // in Reasons
		warning   string // in Warnings
		tolerates int
		fault     string
	}{
		{name: "healthy", st: healthy, peers: up("r1", "r2", "r3"), ready: true, tolerates: 1, fault: "3 of 3 voters up: survives one more failure"},
		{name: "not probed: gossip decides", st: healthy, ready: true, tolerates: 1},
		{name: "one voter down", st: healthy, peers: up("r1", "r2"), ready: true, tolerates: 0,
			fault: "2 of 3 voters up: one more failure stops all grants", warning: "voter r3 does not answer"},
		{name: "two voters down", st: with(func(s *node.Status) { s.LeaderID, s.State = "", "candidate" }), peers: up("r1"),
			reason: "no leader known", tolerates: -1, fault: "1 of 3 voters up: no quorum"},
		{name: "dead in gossip", st: with(func(s *node.Status) {
			s.Members = []node.Member{{ID: "r1", State: node.MemberAlive}, {ID: "r2", State: node.MemberAlive}, {ID: "r3", State: node.MemberDead}}
		}), ready: true, tolerates: 0, warning: "voter r3 is dead in gossip"},
		{name: "in no cluster", st: node.Status{ID: "r9", State: "follower", Formation: "waiting for 2 more founders"},
			reason: "in no cluster yet: waiting for 2 more founders", fault: "no voters known"},
		{name: "halted", st: with(func(s *node.Status) { s.Halted = "node: state machine halted: entry version 9" }),
			reason: "state machine halted: state machine halted: entry version 9"},
		{name: "lost contact", st: with(func(s *node.Status) { s.ID, s.State, s.LastContact = "r2", "follower", time.Minute }),
			reason: "no contact with the leader r1", tolerates: 1},
		{name: "never caught up", st: with(func(s *node.Status) { s.Ready = false }), reason: "not caught up", tolerates: 1},
		{name: "applying", st: with(func(s *node.Status) { s.CommitIndex = 10000 }), reason: "applying the log: 9990 entries behind", tolerates: 1},
		{name: "gossip error", st: with(func(s *node.Status) { s.GossipErr = "node: join: no seed answered" }), ready: true, warning: "gossip: join: no seed answered", tolerates: 1},
		{name: "recent refusal", st: with(func(s *node.Status) {
			s.Refusals = []node.Refusal{{Reason: "cluster_id", Detail: "member r7 belongs to another cluster", Last: now.Add(-time.Minute)}}
		}), ready: true, warning: "refused (cluster_id): member r7 belongs to another cluster", tolerates: 1},
		{name: "lagging member", st: healthy, peers: []node.PeerStatus{{ID: "r1", Reachable: true}, {ID: "r2", Reachable: true, Lag: 5000}, {ID: "r3", Reachable: true}},
			ready: true, warning: "r2 is 5000 entries behind", tolerates: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := assess(tc.st, tc.peers, timing, now)
			if h.Ready != tc.ready || h.Ready != (len(h.Reasons) == 0) {
				t.Errorf("ready %v (reasons %q), want %v", h.Ready, h.Reasons, tc.ready)
			}
			if tc.reason != "" && !slices.ContainsFunc(h.Reasons, func(r string) bool { return strings.Contains(r, tc.reason) }) {
				t.Errorf("reasons %q, want one with %q", h.Reasons, tc.reason)
			}
			if tc.warning != "" && !slices.ContainsFunc(h.Warnings, func(r string) bool { return strings.Contains(r, tc.warning) }) {
				t.Errorf("warnings %q, want one with %q", h.Warnings, tc.warning)
			}
			if h.Voters > 0 && h.Tolerates != tc.tolerates {
				t.Errorf("tolerates %d, want %d (%s)", h.Tolerates, tc.tolerates, h.FaultTolerance)
			}
			if tc.fault != "" && !strings.HasPrefix(h.FaultTolerance, tc.fault) {
				t.Errorf("fault tolerance %q, want %q", h.FaultTolerance, tc.fault)
			}
			for _, s := range append(slices.Clone(h.Reasons), h.Warnings...) {
				if strings.Contains(s, "node: ") {
					t.Errorf("internal prefix shown: %q", s)
				}
			}
		})
	}
}
