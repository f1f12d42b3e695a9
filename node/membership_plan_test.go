package node

import (
	"strings"
	"testing"
	"time"
)

func TestPlanMembership(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	reap := 10 * time.Second
	alive := func(id string) memberView {
		return memberView{ID: id, Addr: id + ":7400", State: MemberAlive, Since: t0, Meta: memberMeta{ID: id, Addr: id + ":7400", State: true}}
	}
	with := func(v memberView, f func(*memberView)) memberView { f(&v); return v }
	dead := func(id string, since time.Time) memberView {
		return with(alive(id), func(v *memberView) { v.State, v.Since = MemberDead, since })
	}
	vs := func(ids ...string) []planServer {
		var out []planServer
		for _, id := range ids {
			out = append(out, planServer{ID: id, Addr: id + ":7400", Voter: true})
		}
		return out
	}
	nv := func(id string) planServer { return planServer{ID: id, Addr: id + ":7400"} }
	members := func(vs ...memberView) map[string]memberView {
		m := map[string]memberView{}
		for _, v := range vs {
			m[v.ID] = v
		}
		return m
	}

	cases := []struct {
		name    string
		in      planInput
		want    string // "kind id" or "" for no action
		note    string // a note reason expected ("" none)
		nextDue time.Time
	}{
		{
			name: "steady state",
			in:   planInput{Servers: vs("a", "b", "c"), Members: members(alive("a"), alive("b"), alive("c"))},
		},
		{
			name: "new member becomes a voter",
			in:   planInput{Servers: vs("a", "b", "c"), Members: members(alive("a"), alive("b"), alive("c"), alive("d"))},
			want: "add_voter d",
		},
		{
			name: "beyond MaxVoters a non-voter",
			in:   planInput{Servers: vs("a", "b", "c", "d", "e"), Members: members(alive("a"), alive("b"), alive("c"), alive("d"), alive("e"), alive("f"))},
			want: "add_nonvoter f",
		},
		{
			name: "suspect newcomer waits",
			in: planInput{Servers: vs("a", "b", "c"), Members: members(alive("a"), alive("b"), alive("c"),
				with(alive("d"), func(v *memberView) { v.State = MemberSuspect }))},
		},
		{
			name: "left voter removed at once",
			in: planInput{Servers: vs("a", "b", "c"), Members: members(alive("a"), alive("b"),
				with(alive("c"), func(v *memberView) { v.State, v.Since = MemberLeft, t0 }))},
			want: "remove_left c",
		},
		{
			name: "leaving voter removed before it is gone",
			in: planInput{Servers: vs("a", "b", "c"), Members: members(alive("a"), alive("b"),
				with(alive("c"), func(v *memberView) { v.Meta.Leaving = true }))},
			want: "remove_left c",
		},
		{
			name:    "failed voter kept before the reap timeout",
			in:      planInput{Servers: vs("a", "b", "c"), Members: members(alive("a"), alive("b"), dead("c", t0.Add(-reap+time.Second)))},
			nextDue: t0.Add(time.Second),
		},
		{
			name: "failed voter reaped after the reap timeout",
			in:   planInput{Servers: vs("a", "b", "c"), Members: members(alive("a"), alive("b"), dead("c", t0.Add(-reap)))},
			want: "reap c",
		},
		{
			name: "failed non-voter reaped",
			in:   planInput{Servers: append(vs("a", "b", "c"), nv("d")), Members: members(alive("a"), alive("b"), alive("c"), dead("d", t0.Add(-reap)))},
			want: "reap d",
		},
		{
			name: "two voters: never reaped below a quorum",
			in:   planInput{Servers: vs("a", "b"), Members: members(alive("a"), dead("b", t0.Add(-time.Hour)))},
			note: "reap_refused",
		},
		{
			name: "gossip says most voters failed: refused (healthy voters would be fewer than a quorum)",
			in: planInput{Servers: vs("a", "b", "c", "d", "e"), Members: members(alive("a"), alive("b"),
				dead("c", t0.Add(-time.Hour)), dead("d", t0.Add(-time.Hour)), dead("e", t0.Add(-time.Hour)))},
			note: "reap_refused",
		},
		{
			name: "two of five failed: reaped one at a time",
			in: planInput{Servers: vs("a", "b", "c", "d", "e"), Members: members(alive("a"), alive("b"), alive("c"),
				dead("d", t0.Add(-time.Hour)), dead("e", t0.Add(-time.Hour)))},
			want: "reap d",
		},
		{
			name: "unknown to gossip: reaped after the timeout since first missed",
			in:   planInput{Servers: vs("a", "b", "c"), Members: members(alive("a"), alive("b")), Missing: map[string]time.Time{"c": t0.Add(-reap)}},
			want: "reap c",
		},
		{
			name:    "unknown to gossip: kept meanwhile",
			in:      planInput{Servers: vs("a", "b", "c"), Members: members(alive("a"), alive("b")), Missing: map[string]time.Time{"c": t0.Add(-time.Second)}},
			nextDue: t0.Add(reap - time.Second),
		},
		{
			name: "voter removed: healthy non-voter promoted",
			in:   planInput{Servers: append(vs("a", "b", "c", "d"), nv("f")), Members: members(alive("a"), alive("b"), alive("c"), alive("d"), alive("f"))},
			want: "promote f",
		},
		{
			name: "suspect non-voter not promoted",
			in: planInput{Servers: append(vs("a", "b", "c", "d"), nv("f")), Members: members(alive("a"), alive("b"), alive("c"), alive("d"),
				with(alive("f"), func(v *memberView) { v.State = MemberSuspect }))},
		},
		{
			name: "too many voters: one demoted (not the leader)",
			in: planInput{Servers: vs("a", "b", "c", "d", "e", "f"), MaxVoters: 5,
				Members: members(alive("a"), alive("b"), alive("c"), alive("d"), alive("e"), alive("f"))},
			want: "demote f",
		},
		{
			name: "address of a configured server refused",
			in: planInput{Servers: vs("a", "b", "c"), Members: members(alive("a"), alive("b"), alive("c"),
				with(alive("x"), func(v *memberView) { v.Addr = "b:7400" }))},
			note: "address",
		},
		{
			name: "two newcomers with one address both refused",
			in: planInput{Servers: vs("a", "b", "c"), Members: members(alive("a"), alive("b"), alive("c"),
				with(alive("x"), func(v *memberView) { v.Addr = "z:1" }), with(alive("y"), func(v *memberView) { v.Addr = "z:1" }))},
			note: "address",
		},
		{
			name: "restarted member with state at a new address is moved",
			in: planInput{Servers: vs("a", "b", "c"), Members: members(alive("a"), alive("b"),
				with(alive("c"), func(v *memberView) { v.Addr = "c2:7400" }))},
			want: "update_address c",
		},
		{
			name: "fresh node reusing a configured id elsewhere refused",
			in: planInput{Servers: vs("a", "b", "c"), Members: members(alive("a"), alive("b"),
				with(alive("c"), func(v *memberView) { v.Addr, v.Meta.State = "c2:7400", false }))},
			note: "duplicate_id",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.in
			in.Self, in.Now, in.ReapTimeout = "a", t0, reap
			if in.MaxVoters == 0 {
				in.MaxVoters = 5
			}
			p := planMembership(in)
			got := ""
			if p.Action != nil {
				got = string(p.Action.Kind) + " " + p.Action.ID
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

func TestMemberMeta(t *testing.T) {
	good := `{"v":1,"wire":1,"id":"a","addr":"a:7400"}`
	if _, _, err := decodeMeta("a", []byte(good)); err != nil {
		t.Fatal(err)
	}
	for in, reason := range map[string]string{
		`{"v":2,"wire":1,"id":"a","addr":"a:7400"}`:   "protocol",
		`{"v":1,"wire":9,"id":"a","addr":"a:7400"}`:   "protocol",
		`{"v":1,"wire":1,"id":"b","addr":"a:7400"}`:   "metadata",
		`{"v":1,"wire":1,"id":"a","addr":"nonsense"}`: "metadata",
		`not json`: "metadata",
	} {
		if _, r, err := decodeMeta("a", []byte(in)); err == nil || r != reason {
			t.Errorf("%s: reason %q err %v, want %q", in, r, err, reason)
		}
	}
}
