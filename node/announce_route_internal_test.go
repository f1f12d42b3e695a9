package node

import (
	"context"
	"maps"
	"slices"
	"testing"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/lockinfo"
)

func TestPlanAnnouncements(t *testing.T) {
	peers := []announcePeer{{"b~2", "addr-b"}, {"c", "addr-c"}} // c: a Raft id from before incarnations
	grant := func(s lockinfo.SessionID) fsm.Event {
		return fsm.Event{Kind: fsmwire.EventGranted, FromQueue: true, Session: s, Token: lockinfo.Token(s)}
	}
	for _, tc := range []struct {
		name   string
		peers  []announcePeer
		grants []fsm.Event
		homes  map[lockinfo.SessionID]string
		want   map[string][]lockinfo.SessionID // address → sessions of the grants sent there
	}{
		{"unknown home: every peer", peers, []fsm.Event{grant(1)}, nil,
			map[string][]lockinfo.SessionID{"addr-b": {1}, "addr-c": {1}}},
		{"home on this leader: nobody", peers, []fsm.Event{grant(1)}, map[lockinfo.SessionID]string{1: ""},
			map[string][]lockinfo.SessionID{}},
		{"home on a peer: that peer", peers, []fsm.Event{grant(1)}, map[lockinfo.SessionID]string{1: "b~2"},
			map[string][]lockinfo.SessionID{"addr-b": {1}}},
		{"pre-incarnation server matched by node id", peers, []fsm.Event{grant(1)}, map[lockinfo.SessionID]string{1: "c~9"},
			map[string][]lockinfo.SessionID{"addr-c": {1}}},
		{"another incarnation of a peer is not that peer", peers, []fsm.Event{grant(1)}, map[lockinfo.SessionID]string{1: "b~1"},
			map[string][]lockinfo.SessionID{"addr-b": {1}, "addr-c": {1}}},
		{"home left the configuration: every peer", peers, []fsm.Event{grant(1)}, map[lockinfo.SessionID]string{1: "gone~1"},
			map[string][]lockinfo.SessionID{"addr-b": {1}, "addr-c": {1}}},
		{"mixed, in grant order per peer", peers, []fsm.Event{grant(1), grant(2), grant(3), grant(4)},
			map[lockinfo.SessionID]string{1: "b~2", 2: "", 3: "c"},
			map[string][]lockinfo.SessionID{"addr-b": {1, 4}, "addr-c": {3, 4}}},
		{"no peers", nil, []fsm.Event{grant(1)}, nil, map[string][]lockinfo.SessionID{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := map[string][]lockinfo.SessionID{}
			for addr, gs := range planAnnouncements(tc.grants, tc.homes, tc.peers) {
				for _, g := range gs {
					got[addr] = append(got[addr], g.Session)
				}
			}
			if !maps.EqualFunc(got, tc.want, slices.Equal) {
				t.Fatalf("plan %v, want %v", got, tc.want)
			}
		})
	}
}

// The leader records a session's home from its waiting Acquires only, keeps
// at most maxHomes, forgets a home when the session ends, and drops it when a
// sender does not say who it is.
func TestAnnouncerHomes(t *testing.T) {
	a := newAnnouncer(announcerHost{})
	prop := func(cmd fsm.Command, origin string) *proposal {
		p := newProposal(context.Background(), cmd)
		p.origin = origin
		return p
	}
	a.noteHomes([]*proposal{
		prop(fsm.Acquire{Session: 1, Lock: "l", Wait: true}, "b~2"),
		prop(fsm.Acquire{Session: 2, Lock: "l"}, "b~2"), // no wait: never granted from a line
		prop(fsm.Release{Session: 3, Lock: "l"}, "b~2"),
		prop(fsm.Acquire{Session: 4, Lock: "l", Wait: true}, ""),
	})
	if want := map[lockinfo.SessionID]string{1: "b~2", 4: ""}; !maps.Equal(a.homes, want) {
		t.Fatalf("homes %v, want %v", a.homes, want)
	}
	a.noteHomes([]*proposal{prop(fsm.Acquire{Session: 1, Lock: "m", Wait: true}, originUnknown)})
	if _, ok := a.homes[1]; ok {
		t.Fatal("a sender that did not say who it is left the old home in place")
	}
	a.forgetHomes([]fsm.Event{{Kind: fsmwire.EventSessionExpired, Session: 4}, {Kind: fsmwire.EventReleased, Session: 9}})
	if len(a.homes) != 0 {
		t.Fatalf("homes %v after the session expired, want none", a.homes)
	}

	for i := range maxHomes {
		a.homes[lockinfo.SessionID(i+100)] = "b~2"
	}
	a.noteHomes([]*proposal{
		prop(fsm.Acquire{Session: 1, Lock: "l", Wait: true}, "b~2"),   // new: over the bound
		prop(fsm.Acquire{Session: 100, Lock: "l", Wait: true}, "c~1"), // known: updated
	})
	if _, ok := a.homes[1]; ok || len(a.homes) != maxHomes || a.homes[100] != "c~1" {
		t.Fatalf("at the bound: %d homes, session 1 kept %v, session 100 → %q", len(a.homes), ok, a.homes[100])
	}
}

func TestOriginOf(t *testing.T) {
	for _, tc := range []struct{ node, inc, want string }{
		{"a", "x1", "a~x1"},
		{"a", "", "a"},
		{"", "", originUnknown},
	} {
		if got := originOf(tc.node, tc.inc); got != tc.want {
			t.Errorf("originOf(%q, %q) = %q, want %q", tc.node, tc.inc, got, tc.want)
		}
	}
}
