package membership

import (
	"strings"
	"testing"
	"time"
)

func TestTargetVoters(t *testing.T) {
	for _, c := range []struct{ n, max, want int }{
		{0, 5, 1}, {1, 5, 1}, {2, 5, 1}, {3, 5, 3}, {4, 5, 3}, {5, 5, 5}, {6, 5, 5}, {9, 5, 5}, {7, 7, 7}, {8, 4, 3}, {4, 4, 3},
	} {
		if got := TargetVoters(c.n, c.max); got != c.want {
			t.Errorf("TargetVoters(%d, %d) = %d, want %d", c.n, c.max, got, c.want)
		}
	}
}

func TestPlanMembership(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	reap, stab := 10*time.Second, 5*time.Second
	rid := func(id string) string { return id + "~" + id + id }
	alive := func(id string) Member {
		return Member{NodeID: id, RaftID: rid(id), Addr: id + ":7400", State: Alive, Since: t0.Add(-time.Hour), HasState: true, Verified: true, ClusterID: "c1"}
	}
	with := func(m Member, f func(*Member)) Member { f(&m); return m }
	dead := func(id string, since time.Time) Member {
		return with(alive(id), func(m *Member) { m.State, m.Since = Dead, since })
	}
	fresh := func(id string) Member {
		return with(alive(id), func(m *Member) { m.HasState, m.ClusterID = false, "" })
	}
	vs := func(ids ...string) []Server {
		var out []Server
		for _, id := range ids {
			out = append(out, Server{RaftID: rid(id), NodeID: id, Addr: id + ":7400", Voter: true})
		}
		return out
	}
	nv := func(id string) Server { return Server{RaftID: rid(id), NodeID: id, Addr: id + ":7400"} }
	members := func(ms ...Member) map[string]Member {
		out := map[string]Member{}
		for _, m := range ms {
			out[m.NodeID] = m
		}
		return out
	}
	ok := Health{Reachable: true, Healthy: true, Since: t0.Add(-time.Hour)}
	healthAll := func(ids ...string) map[string]Health {
		out := map[string]Health{}
		for _, id := range ids {
			out[rid(id)] = ok
		}
		return out
	}
	withHealth := func(h map[string]Health, id string, x Health) map[string]Health { h[rid(id)] = x; return h }

	cases := []struct {
		name    string
		in      Input
		want    string // "kind node" or "" for no action
		note    string // a note reason expected ("" none)
		nextDue time.Time
	}{
		{
			name: "steady state",
			in:   Input{Servers: vs("a", "b", "c"), Members: members(alive("a"), alive("b"), alive("c")), Health: healthAll("b", "c")},
		},
		{
			name: "new member joins as a non-voter (never straight to voter)",
			in:   Input{Servers: vs("a", "b", "c"), Members: members(alive("a"), alive("b"), alive("c"), fresh("d")), Health: healthAll("b", "c")},
			want: "add_nonvoter d",
		},
		{
			name: "unverified member is not added",
			in: Input{Servers: vs("a", "b", "c"), Members: members(alive("a"), alive("b"), alive("c"),
				with(fresh("d"), func(m *Member) { m.Verified = false })), Health: healthAll("b", "c")},
			note: "unverified",
		},
		{
			name: "member of another cluster refused",
			in: Input{ClusterID: "c1", Servers: vs("a", "b", "c"), Members: members(alive("a"), alive("b"), alive("c"),
				with(alive("x"), func(m *Member) { m.ClusterID = "c2" })), Health: healthAll("b", "c")},
			note: "cluster_id",
		},
		{
			name: "member whose binary is below the cluster version refused",
			in: Input{ClusterVersion: 2, Servers: vs("a", "b", "c"), Members: members(alive("a"), alive("b"), alive("c"),
				with(fresh("d"), func(m *Member) { m.MaxVersion = 1 })), Health: healthAll("b", "c")},
			note: "version",
		},
		{
			name: "additions are rate limited",
			in: Input{Servers: vs("a", "b", "c"), Members: members(alive("a"), alive("b"), alive("c"), fresh("d")), Health: healthAll("b", "c"),
				LastAdd: t0.Add(-time.Second), AddInterval: 3 * time.Second},
			nextDue: t0.Add(2 * time.Second),
		},
		{
			name: "non-voters capped",
			in: Input{Servers: append(vs("a", "b", "c"), nv("d"), nv("e")), Members: members(alive("a"), alive("b"), alive("c"), alive("d"), alive("e"), fresh("f")),
				Health: healthAll("b", "c", "d", "e"), MaxNonvoters: 2, Stabilization: time.Nanosecond},
			note: "full",
			want: "promote d",
		},
		{
			name: "suspect newcomer waits",
			in: Input{Servers: vs("a", "b", "c"), Members: members(alive("a"), alive("b"), alive("c"),
				with(fresh("d"), func(m *Member) { m.State = Suspect })), Health: healthAll("b", "c")},
		},
		{
			name: "a fourth voter is not made: 3 voters + 1 stable non-voter stays 3",
			in: Input{Servers: append(vs("a", "b", "c"), nv("d")), Members: members(alive("a"), alive("b"), alive("c"), alive("d")),
				Health: healthAll("b", "c", "d")},
		},
		{
			name: "two stable non-voters: promote towards five",
			in: Input{Servers: append(vs("a", "b", "c"), nv("d"), nv("e")), Members: members(alive("a"), alive("b"), alive("c"), alive("d"), alive("e")),
				Health: healthAll("b", "c", "d", "e")},
			want: "promote d",
		},
		{
			name: "non-voter not yet stable: promotion scheduled",
			in: Input{Servers: append(vs("a"), nv("b"), nv("c")), Members: members(alive("a"), alive("b"), alive("c")),
				Health: withHealth(healthAll("b"), "c", Health{Reachable: true, Healthy: true, Since: t0.Add(-time.Second)})},
			nextDue: t0.Add(stab - time.Second),
		},
		{
			name: "unreachable non-voter never promoted (TLS mismatch, cut)",
			in: Input{Servers: append(vs("a"), nv("b"), nv("c")), Members: members(alive("a"), alive("b"), alive("c")),
				Health: withHealth(healthAll("c"), "b", Health{Down: t0.Add(-time.Minute)})},
			want: "reap b",
		},
		{
			name: "unreachable non-voter, not yet reaped, not promoted",
			in: Input{Servers: append(vs("a"), nv("b"), nv("c")), Members: members(alive("a"), alive("b"), alive("c")),
				Health: withHealth(healthAll("c"), "b", Health{Down: t0.Add(-time.Second)})},
			nextDue: t0.Add(reap - time.Second),
		},
		{
			name: "leaving (decommissioned) voter removed when quorum stays",
			in: Input{Servers: vs("a", "b", "c"), Members: members(alive("a"), alive("b"),
				with(alive("c"), func(m *Member) { m.Leaving = true })), Health: healthAll("b", "c")},
			want: "remove_leaving c",
		},
		{
			name: "leaving voter kept while another voter is down (graceful restart during an outage)",
			in: Input{Servers: vs("a", "b", "c"), Members: members(alive("a"), dead("b", t0.Add(-time.Second)),
				with(alive("c"), func(m *Member) { m.Leaving = true })), Health: withHealth(healthAll("c"), "b", Health{Down: t0.Add(-time.Second)})},
			note:    "leave_refused",
			nextDue: t0.Add(reap - time.Second),
		},
		{
			name: "a restarting member (Close) that left gossip is not removed before the reap timeout",
			in: Input{Gossip: true, Servers: vs("a", "b", "c"), Members: members(alive("a"), alive("b"),
				with(alive("c"), func(m *Member) { m.State, m.Since = Left, t0.Add(-time.Second) })), Health: healthAll("b")},
			nextDue: t0.Add(reap - time.Second),
		},
		{
			name: "a voter whose gossip is cut but which answers probes is not reaped",
			in: Input{Gossip: true, Servers: vs("a", "b", "c"), Members: members(alive("a"), alive("b"), dead("c", t0.Add(-time.Hour))),
				Health: healthAll("b", "c")},
		},
		{
			name: "failed voter reaped after the reap timeout",
			in: Input{Gossip: true, Servers: vs("a", "b", "c"), Members: members(alive("a"), alive("b"), dead("c", t0.Add(-reap))),
				Health: healthAll("b")},
			want: "reap c",
		},
		{
			name: "two voters: never reaped below a quorum",
			in:   Input{Gossip: true, Servers: vs("a", "b"), Members: members(alive("a"), dead("b", t0.Add(-time.Hour)))},
			note: "reap_refused",
		},
		{
			name: "most voters failed: refused",
			in: Input{Gossip: true, Servers: vs("a", "b", "c", "d", "e"), Members: members(alive("a"), alive("b"),
				dead("c", t0.Add(-time.Hour)), dead("d", t0.Add(-time.Hour)), dead("e", t0.Add(-time.Hour))), Health: healthAll("b")},
			note: "reap_refused",
		},
		{
			name: "two of five failed: reaped one at a time",
			in: Input{Gossip: true, Servers: vs("a", "b", "c", "d", "e"), Members: members(alive("a"), alive("b"), alive("c"),
				dead("d", t0.Add(-time.Hour)), dead("e", t0.Add(-time.Hour))), Health: healthAll("b", "c")},
			want: "reap d",
		},
		{
			name: "unknown to gossip: reaped after the timeout since first missed",
			in: Input{Gossip: true, Servers: vs("a", "b", "c"), Members: members(alive("a"), alive("b")),
				Missing: map[string]time.Time{rid("c"): t0.Add(-reap)}, Health: healthAll("b")},
			want: "reap c",
		},
		{
			name: "static: down servers reaped by probes",
			in:   Input{Servers: vs("a", "b", "c"), Members: members(alive("a"), alive("b")), Health: withHealth(healthAll("b"), "c", Health{Down: t0.Add(-reap)})},
			want: "reap c",
		},
		{
			name: "amnesia: the old incarnation is replaced when its address answers as a new one",
			in: Input{Servers: vs("a", "b", "c"), Members: members(alive("a"), alive("c"),
				with(fresh("b"), func(m *Member) { m.RaftID = "b~new" })),
				Health: withHealth(healthAll("c"), "b", Health{Reachable: true, Gone: true})},
			want: "replace b",
		},
		{
			name: "amnesia with a lagging third voter down: the old incarnation stays (no quorum after)",
			in: Input{Servers: vs("a", "b", "c"), Members: members(alive("a"), dead("c", t0.Add(-time.Second)),
				with(fresh("b"), func(m *Member) { m.RaftID = "b~new" })),
				Health: withHealth(withHealth(healthAll(), "b", Health{Reachable: true, Gone: true}), "c", Health{Down: t0.Add(-time.Second)})},
			note:    "replace_refused",
			nextDue: t0.Add(reap - time.Second),
		},
		{
			name: "amnesia: the new incarnation is not added while the old one is configured",
			in: Input{Servers: vs("a", "b", "c"), Members: members(alive("a"), alive("c"),
				with(fresh("b"), func(m *Member) { m.RaftID = "b~new" })),
				Health: healthAll("b", "c")},
		},
		{
			name: "duplicate id at another address while the configured one answers",
			in: Input{Servers: vs("a", "b", "c"), Members: members(alive("a"), alive("c"),
				with(fresh("b"), func(m *Member) { m.RaftID, m.Addr = "b~new", "b2:7400" })),
				Health: healthAll("b", "c")},
			note: "duplicate_id",
		},
		{
			name: "after the replacement the new incarnation joins as a non-voter",
			in: Input{Servers: vs("a", "c"), Members: members(alive("a"), alive("c"),
				with(fresh("b"), func(m *Member) { m.RaftID = "b~new" })), Health: healthAll("c")},
			want: "add_nonvoter b",
		},
		{
			name: "too many voters: one demoted (not the leader)",
			in: Input{Servers: vs("a", "b", "c", "d", "e", "f"), MaxVoters: 5,
				Members: members(alive("a"), alive("b"), alive("c"), alive("d"), alive("e"), alive("f")), Health: healthAll("b", "c", "d", "e", "f")},
			want: "demote f",
		},
		{
			name: "four voters and a healthy, not yet stable non-voter: no demotion (it will make five)",
			in: Input{Servers: append(vs("a", "b", "c", "d"), nv("e")), Members: members(alive("a"), alive("b"), alive("c"), alive("d"), alive("e")),
				Health: withHealth(healthAll("b", "c", "d"), "e", Health{Reachable: true, Healthy: true, Since: t0.Add(-time.Second)})},
			nextDue: t0.Add(stab - time.Second),
		},
		{
			name: "even voter count (a static 4) demoted to 3",
			in: Input{Servers: vs("a", "b", "c", "d"), Members: members(alive("a"), alive("b"), alive("c"), alive("d")),
				Health: healthAll("b", "c", "d")},
			want: "demote d",
		},
		{
			name: "address of a configured server refused",
			in: Input{Servers: vs("a", "b", "c"), Members: members(alive("a"), alive("b"), alive("c"),
				with(fresh("x"), func(m *Member) { m.Addr = "b:7400" })), Health: healthAll("b", "c")},
			note: "address",
		},
		{
			name: "two newcomers with one address both refused",
			in: Input{Servers: vs("a", "b", "c"), Members: members(alive("a"), alive("b"), alive("c"),
				with(fresh("x"), func(m *Member) { m.Addr = "z:1" }), with(fresh("y"), func(m *Member) { m.Addr = "z:1" })), Health: healthAll("b", "c")},
			note: "address",
		},
		{
			name: "restarted member at a new address is moved",
			in: Input{Servers: vs("a", "b", "c"), Members: members(alive("a"), alive("b"),
				with(alive("c"), func(m *Member) { m.Addr = "c2:7400" })), Health: healthAll("b", "c")},
			want: "update_address c",
		},
		{
			name: "moving an unverified member refused (a stranger claiming a crashed voter's name)",
			in: Input{Servers: vs("a", "b", "c"), Members: members(alive("a"), alive("b"),
				with(alive("c"), func(m *Member) { m.Addr, m.Verified = "evil:7400", false })), Health: healthAll("b")},
			note: "unverified",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.in
			in.Self, in.Now, in.ReapTimeout, in.Stabilization = rid("a"), t0, reap, stab
			if tc.in.Stabilization != 0 {
				in.Stabilization = tc.in.Stabilization
			}
			if in.MaxVoters == 0 {
				in.MaxVoters = 5
			}
			if in.MaxNonvoters == 0 {
				in.MaxNonvoters = 16
			}
			p := PlanMembership(in)
			got := ""
			if p.Action != nil {
				got = string(p.Action.Kind) + " " + p.Action.NodeID
			}
			if got != tc.want {
				t.Fatalf("action %q, want %q (notes %+v)", got, tc.want, p.Notes)
			}
			var reasons []string
			for _, n := range p.Notes {
				reasons = append(reasons, n.Reason)
			}
			if tc.note == "" && len(reasons) > 0 || tc.note != "" && !strings.Contains(strings.Join(reasons, ","), tc.note) {
				t.Fatalf("notes %v, want %q", reasons, tc.note)
			}
			if !tc.nextDue.IsZero() && !p.Next.Equal(tc.nextDue) {
				t.Fatalf("next check %v, want %v", p.Next, tc.nextDue)
			}
		})
	}
}
