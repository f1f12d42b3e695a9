package main

import (
	"testing"
	"time"
)

func TestPlan(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	const grace = 2 * time.Second
	for _, tc := range []struct {
		name string
		w    watch
		now  time.Time
		act  action
		wake time.Time
	}{
		{"valid: wait until grace before the deadline", watch{deadline: at(10)}, at(0), actNone, at(8)},
		{"grace before the deadline: SIGTERM, kill at the deadline", watch{deadline: at(10)}, at(8), actTerm, at(10)},
		{"renewed after the SIGTERM: kill grace after it", watch{deadline: at(30), termSent: at(8)}, at(9), actNone, at(10)},
		{"grace after the SIGTERM: SIGKILL", watch{deadline: at(30), termSent: at(8)}, at(10), actKill, time.Time{}},
		{"deadline before the grace ends: SIGKILL at the deadline", watch{deadline: at(9), termSent: at(8)}, at(9), actKill, time.Time{}},
		{"deadline passed without a SIGTERM: SIGKILL", watch{deadline: at(10)}, at(11), actKill, time.Time{}},
		{"lost: SIGTERM at once", watch{deadline: at(10), lost: true}, at(1), actTerm, at(3)},
		{"lost, SIGTERM sent: kill grace after it", watch{deadline: at(10), lost: true, termSent: at(1)}, at(2), actNone, at(3)},
		{"lost, grace over: SIGKILL", watch{deadline: at(10), lost: true, termSent: at(1)}, at(3), actKill, time.Time{}},
		{"lost after the deadline: SIGKILL", watch{deadline: at(10), lost: true}, at(10), actKill, time.Time{}},
		{"lost near the deadline: SIGTERM, kill at the deadline", watch{deadline: at(10), lost: true}, at(9), actTerm, at(10)},
		{"killed: nothing more", watch{deadline: at(10), killSent: true}, at(20), actNone, time.Time{}},
	} {
		act, wake := plan(tc.w, tc.now, grace)
		if act != tc.act || !wake.Equal(tc.wake) {
			t.Errorf("%s: %v, wake %v; want %v, wake %v", tc.name, act, wake.Sub(t0), tc.act, tc.wake.Sub(t0))
		}
	}
}
