package fsm

import (
	"slices"
	"testing"

	"github.com/raftlock/raftlock/internal/fsmwire"
)

// SessionAcquisitions lists every acquisition of a session — exclusive,
// read and semaphore grants and waits — sorted, and follows its changes.
func TestSessionAcquisitionsListsEveryKind(t *testing.T) {
	h := atVersion(t, 3)
	a, b, _ := lapseFixture(t, h)
	want := []Acquisition{{"busy", owner(5)}, {"pool", owner(3)}, {"rw", owner(2)}, {"x", owner(1)}}
	wantStatus(t, "a second owner on rw", h.do(Acquire{Session: a, Lock: "rw", Owner: owner(0), Shared: true}), fsmwire.StatusGranted)
	want = slices.Insert(want, 2, Acquisition{"rw", owner(0)})
	if got := h.f.SessionAcquisitions(a); !slices.Equal(got, want) {
		t.Fatalf("acquisitions of a: %v, want %v", got, want)
	}
	if got := h.f.SessionAcquisitions(b); !slices.Equal(got, []Acquisition{{"busy", owner(4)}, {"x", owner(6)}}) {
		t.Fatalf("acquisitions of b: %v", got)
	}
	wantStatus(t, "release", h.do(Release{Session: a, Lock: "pool", Owner: owner(3)}), fsmwire.StatusOK)
	want = slices.DeleteFunc(want, func(x Acquisition) bool { return x.Lock == "pool" })
	if got := h.f.SessionAcquisitions(a); !slices.Equal(got, want) {
		t.Fatalf("after a release: %v, want %v", got, want)
	}
	h.do(CloseSession{Session: a})
	if got := h.f.SessionAcquisitions(a); got != nil {
		t.Fatalf("a closed session: %v", got)
	}
}
