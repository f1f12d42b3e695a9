package lockapi

import (
	"math/rand/v2"
	"testing"
	"time"
)

// A node's sessions renew in few wakeups: 100 sessions that keep their
// leases for 30 s, each on its own jittered TTL/3 schedule, fire their
// keepalives at most once per 500 ms (a grid), not at one instant per
// keepalive.
// Every wakeup of an idle process costs more than the work it does (the
// runtime's sysmon spins for a millisecond after each), and keepalives that
// fire together share one write and, on the leader, one leadership round.
// Simulated on the planner: instants counted, nothing timed.
func TestKeepalivesFireTogether(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	jit := func(d time.Duration) time.Duration { return d - d/10 + time.Duration(rng.Int64N(int64(d/5+1))) }
	const sessions, ttl, window = 100, 10 * time.Second, 30 * time.Second
	start := time.Unix(1_000_000, 0)
	instants := map[time.Time]bool{}
	keepalives := 0
	for i := range sessions {
		now := start.Add(time.Duration(rng.Int64N(int64(ttl / 3)))) // opened at random times
		valid := now.Add(ttl - ttl/10)
		for now.Before(start.Add(window)) {
			d := keepAliveDelay(now, valid, start, ttl, jit)
			if d < ttl/50 || d > ttl/3+ttl/30 {
				t.Fatalf("session %d: delay %v outside [TTL/50, TTL/3+10%%]", i, d)
			}
			if now.Add(d).After(valid) {
				t.Fatalf("session %d: keepalive planned after the lease ends", i)
			}
			now = now.Add(d)
			valid = now.Add(ttl - ttl/10) // renewed at once
			instants[now] = true
			keepalives++
		}
	}
	// At most one instant per 500 ms of the window (the grid of a 10 s TTL).
	if max := int(window/(500*time.Millisecond)) + 1; len(instants) > max {
		t.Fatalf("%d keepalives fired at %d distinct instants (at most %d expected: a node's keepalives share wakeups)", keepalives, len(instants), max)
	}
	t.Logf("%d keepalives at %d instants", keepalives, len(instants))
}
