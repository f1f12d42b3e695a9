package chaos

import "testing"

// ownerLog: the formation's two cluster-changed events, then A (owner oa)
// holds x while B (ob) and C (oc) queue in that order; A releases and the
// lock passes to B, then B releases and it passes to C.
func ownerLog() *hb {
	return newHB().
		ev(LogEvent{Index: 1, Kind: "cluster-changed", At: 1, Observed: 1}).
		ev(LogEvent{Index: 2, Kind: "cluster-changed", At: 2, Observed: 2}).
		ev(LogEvent{Index: 3, Kind: EvGranted, Lock: "x", Owner: "oa", Token: 1, At: 3, Observed: 3}).
		ev(LogEvent{Index: 4, Kind: EvQueued, Lock: "x", Owner: "ob", At: 4, Observed: 4}).
		ev(LogEvent{Index: 5, Kind: EvQueued, Lock: "x", Owner: "oc", At: 5, Observed: 5})
}

func ownerViolations(r *Report) (n int) {
	for _, v := range r.Violations {
		if v.Check == CheckExactlyOnce || v.Check == CheckFIFO {
			n++
		}
	}
	return n
}

func TestCheckOwners(t *testing.T) {
	clean := func() *hb {
		return ownerLog().
			ev(LogEvent{Index: 6, Kind: EvReleased, Lock: "x", Owner: "oa", Token: 1, Reason: "owner", At: 6, Observed: 6}).
			ev(LogEvent{Index: 6, Kind: EvGranted, Lock: "x", Owner: "ob", Token: 2, At: 6, Observed: 6}).
			ev(LogEvent{Index: 7, Kind: EvReleased, Lock: "x", Owner: "ob", Token: 2, Reason: "owner", At: 7, Observed: 7}).
			ev(LogEvent{Index: 7, Kind: EvGranted, Lock: "x", Owner: "oc", Token: 3, At: 7, Observed: 7}).
			ev(LogEvent{Index: 8, Kind: EvReleased, Lock: "x", Owner: "oc", Token: 3, Reason: "owner", At: 8, Observed: 8})
	}
	for _, tc := range []struct {
		name  string
		b     *hb
		check string // "" = none of the two
	}{
		{"hand-offs in queue order", clean(), ""},
		{"a released acquisition granted again (a delayed duplicate Acquire)", clean().
			ev(LogEvent{Index: 9, Kind: EvGranted, Lock: "x", Owner: "oa", Token: 4, At: 9, Observed: 9}), CheckExactlyOnce},
		{"a withdrawn waiter granted", ownerLog().
			ev(LogEvent{Index: 6, Kind: EvDequeued, Lock: "x", Owner: "ob", Reason: "owner", At: 6, Observed: 6}).
			ev(LogEvent{Index: 7, Kind: EvReleased, Lock: "x", Owner: "oa", Token: 1, Reason: "owner", At: 7, Observed: 7}).
			ev(LogEvent{Index: 7, Kind: EvGranted, Lock: "x", Owner: "ob", Token: 2, At: 7, Observed: 7}), CheckExactlyOnce},
		{"the second waiter granted first", ownerLog().
			ev(LogEvent{Index: 6, Kind: EvReleased, Lock: "x", Owner: "oa", Token: 1, Reason: "owner", At: 6, Observed: 6}).
			ev(LogEvent{Index: 6, Kind: EvGranted, Lock: "x", Owner: "oc", Token: 2, At: 6, Observed: 6}), CheckFIFO},
		{"a withdrawn first waiter lets the second go first", ownerLog().
			ev(LogEvent{Index: 6, Kind: EvDequeued, Lock: "x", Owner: "ob", Reason: "owner", At: 6, Observed: 6}).
			ev(LogEvent{Index: 7, Kind: EvReleased, Lock: "x", Owner: "oa", Token: 1, Reason: "owner", At: 7, Observed: 7}).
			ev(LogEvent{Index: 7, Kind: EvGranted, Lock: "x", Owner: "oc", Token: 2, At: 7, Observed: 7}), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.b.h.Expect.ExactlyOnce = true
			r := checked(t, tc.b)
			if tc.check == "" {
				if n := ownerViolations(r); n != 0 {
					t.Fatalf("flagged a correct log: %+v", r.Violations)
				}
				return
			}
			requireViolation(t, r, tc.check)
		})
	}
}

// Before the version raise (fewer than two cluster-changed events), or in
// a cluster that began at version 1 (ExactlyOnce unset), a redelivered
// Acquire may legally be granted again: nothing is flagged.
func TestCheckOwnersOnlyFromExactlyOnce(t *testing.T) {
	regrant := func() *hb {
		return newHB().
			ev(LogEvent{Index: 1, Kind: "cluster-changed", At: 1, Observed: 1}).
			ev(LogEvent{Index: 2, Kind: EvGranted, Lock: "x", Owner: "oa", Token: 1, At: 2, Observed: 2}).
			ev(LogEvent{Index: 3, Kind: EvReleased, Lock: "x", Owner: "oa", Token: 1, Reason: "owner", At: 3, Observed: 3}).
			ev(LogEvent{Index: 4, Kind: EvGranted, Lock: "x", Owner: "oa", Token: 2, At: 4, Observed: 4})
	}
	early := regrant()
	early.h.Expect.ExactlyOnce = true
	if n := ownerViolations(checked(t, early)); n != 0 {
		t.Errorf("flagged a re-grant before the version raise")
	}
	v1 := regrant().ev(LogEvent{Index: 5, Kind: "cluster-changed", At: 5, Observed: 5}).
		ev(LogEvent{Index: 6, Kind: EvReleased, Lock: "x", Owner: "oa", Token: 2, Reason: "owner", At: 6, Observed: 6}).
		ev(LogEvent{Index: 7, Kind: EvGranted, Lock: "x", Owner: "oa", Token: 3, At: 7, Observed: 7})
	if n := ownerViolations(checked(t, v1)); n != 0 {
		t.Errorf("flagged a cluster that began at version 1")
	}
	v1.h.Expect.ExactlyOnce = true
	requireViolation(t, checked(t, v1), CheckExactlyOnce)
}
