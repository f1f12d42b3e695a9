package leasetrace

import (
	"testing"
)

// With no sink attached to a key, For costs no allocation: the report
// points of package node and lockapi stay off the hot path's allocations.
func TestForAllocatesNothing(t *testing.T) {
	key, other := new(int), new(int)
	check := func(when string) {
		t.Helper()
		var got Sink
		if n := testing.AllocsPerRun(100, func() { got = For(key) }); n != 0 {
			t.Errorf("%s: For allocates %v times per call", when, n)
		}
		if got != nil {
			t.Errorf("%s: For returns a sink for a key nothing is attached to", when)
		}
	}
	check("nothing attached")
	var r Recorder
	detach := r.Attach(other, "n2")
	check("another key attached")
	detach()
	detach() // a second call does nothing
	check("detached")
}

// A Recorder stamps each event with its node, keeps the first apply of an
// index only, and records nothing once detached.
func TestRecorder(t *testing.T) {
	var r Recorder
	a, b := new(int), new(int)
	da, db := r.Attach(a, "n1"), r.Attach(b, "n2")
	For(a).Record(Event{At: 1, Kind: Applied, Index: 7})
	For(b).Record(Event{At: 2, Kind: Applied, Index: 7}) // the same entry, applied later
	For(b).Record(Event{At: 3, Kind: Lead, Term: 2})
	db()
	if For(b) != nil {
		t.Fatal("a detached key still has a sink")
	}
	For(a).Record(Event{At: 4, Kind: Applied, Index: 8})
	da()
	got := r.Events()
	want := []Event{{At: 1, Node: "n1", Kind: Applied, Index: 7}, {At: 3, Node: "n2", Kind: Lead, Term: 2}, {At: 4, Node: "n1", Kind: Applied, Index: 8}}
	if len(got) != len(want) {
		t.Fatalf("recorded %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i].At != want[i].At || got[i].Node != want[i].Node || got[i].Kind != want[i].Kind || got[i].Index != want[i].Index || got[i].Term != want[i].Term {
			t.Errorf("event %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}
