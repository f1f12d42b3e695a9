package chaos

import (
	"testing"
	"time"
)

// Self-tests of the checkers added for the fault classes: each gets a
// history that violates it, and the clean history passes them all.

func srv(id string, voter bool) ConfigServer {
	return ConfigServer{ID: id, Addr: id + ":7400", Voter: voter}
}

func TestCheckDigestSamplesDiverge(t *testing.T) {
	b := clean()
	b.h.Samples = []DigestSample{
		{Node: "n1", Index: 5, Hash: "aa", Source: "live"},
		{Node: "n2", Index: 5, Hash: "aa", Source: "live"},
		{Node: "n3", Index: 5, Hash: "bb", Source: "disk"},
	}
	r := checked(t, b)
	requireViolation(t, r, CheckReplicasAgree)
	if r.IndexesCompared != 1 {
		t.Fatalf("indexes compared %d", r.IndexesCompared)
	}
	b = clean()
	b.h.Disagreements = []string{"replicas disagree on the event at index 3 position 0"}
	requireViolation(t, checked(t, b), CheckReplicasAgree)
}

func TestCheckLogMatching(t *testing.T) {
	b := clean()
	b.h.Entries = []EntrySample{{Node: "n1", Index: 1, Term: 1, Hash: "a"}, {Node: "b1", Index: 1, Term: 1, Hash: "b"}, {Node: "n2", Index: 1, Term: 2, Hash: "c"}}
	requireViolation(t, checked(t, b), CheckLogMatching)
	// Same index, different terms: an overwritten uncommitted entry, fine.
	b = clean()
	b.h.Entries = []EntrySample{{Node: "n1", Index: 4, Term: 2, Hash: "a"}, {Node: "n2", Index: 4, Term: 3, Hash: "b"}}
	if r := checked(t, b); !r.OK() {
		t.Fatalf("different terms flagged: %+v", r.Violations)
	}
}

func TestCheckElectionSafety(t *testing.T) {
	b := clean()
	b.h.Leaders = []LeaderSample{{Node: "n1", Term: 2}, {Node: "n4", Term: 2}, {Node: "n1", Term: 3}}
	requireViolation(t, checked(t, b), CheckElectionSafety)
}

func TestCheckClusterIdentity(t *testing.T) {
	// Two bootstrapped configurations (split brain at formation).
	b := clean()
	b.h.Expect.Members = []string{"n1", "n2", "n3", "n4", "n5"}
	b.h.Configs = []ConfigSample{
		{Node: "n1", Source: "log", Index: 1, Term: 1, Servers: []ConfigServer{srv("n1", true), srv("n2", true), srv("n3", true)}},
		{Node: "n4", Source: "log", Index: 1, Term: 1, Servers: []ConfigServer{srv("n2", true), srv("n4", true), srv("n5", true)}},
	}
	requireViolation(t, checked(t, b), CheckClusterIdentity)
	// Another cluster's member in the configuration (a merge).
	b = clean()
	b.h.Expect.Members = []string{"n1", "n2", "n3"}
	b.h.Configs = []ConfigSample{{Node: "n1", Source: "live", Servers: []ConfigServer{srv("n1", true), srv("n2", true), srv("n3", true), srv("b1", true)}}}
	requireViolation(t, checked(t, b), CheckClusterIdentity)
	// A member at someone else's address (its name taken over).
	b = clean()
	b.h.Expect.Addrs = map[string]string{"n2": "n2:7400"}
	b.h.Configs = []ConfigSample{{Node: "n1", Source: "log", Index: 9, Servers: []ConfigServer{srv("n1", true), {ID: "n2", Addr: "evil:7400", Voter: true}}}}
	requireViolation(t, checked(t, b), CheckClusterIdentity)
	// A replica whose cluster id changes.
	b = clean()
	b.h.Configs = []ConfigSample{{Node: "n1", Source: "live", ClusterID: "x", Servers: []ConfigServer{srv("n1", true)}}, {Node: "n1", At: 5, Source: "live", ClusterID: "y", Servers: []ConfigServer{srv("n1", true)}}}
	requireViolation(t, checked(t, b), CheckClusterIdentity)
	// One chain: the same configurations everywhere pass.
	b = clean()
	b.h.Expect.Members = []string{"n1", "n2", "n3"}
	three := []ConfigServer{srv("n1", true), srv("n2", true), srv("n3", true)}
	b.h.Configs = []ConfigSample{{Node: "n1", Source: "log", Index: 1, Term: 1, Servers: three}, {Node: "n2", Source: "snapshot", Index: 1, Servers: three}, {Node: "n3", Source: "live", Servers: three}}
	if r := checked(t, b); !r.OK() {
		t.Fatalf("one configuration history flagged: %+v", r.Violations)
	}
}

func TestCheckUnreachableAndEvenVoters(t *testing.T) {
	b := clean()
	b.h.Expect = Expect{Unreachable: []Unreachable{{ID: "n4", From: 10 * ms, To: 500 * ms}}, OddVoters: true, StableFor: 100 * ms}
	four := []ConfigServer{srv("n1", true), srv("n2", true), srv("n3", true), srv("n4", true)}
	b.h.Configs = []ConfigSample{
		{Node: "n1", At: 0, Source: "live", Servers: four[:3]},
		{Node: "n1", At: 20 * ms, Source: "live", Servers: four},
		{Node: "n1", At: 600 * ms, Source: "live", Servers: four[:3]},
	}
	r := checked(t, b)
	requireViolation(t, r, CheckUnreachableVoter)
	requireViolation(t, r, CheckOddVoters)
	// Outside its window the member may be a voter; a short even phase
	// (promoting two members one by one) is fine.
	b.h.Expect.Unreachable[0].To = 15 * ms
	b.h.Expect.StableFor = time.Second.Nanoseconds()
	if r := checked(t, b); !r.OK() {
		t.Fatalf("flagged: %+v", r.Violations)
	}
}

// A node's view of the configuration ends when the node stops — the
// harness reads its data dir then (samples from "log"/"snapshot") — not at
// its next live sample after a restart, nor at its last live sample (live
// configurations are sampled on change only: the last one may be long
// before the node stopped). Membership seed 6: a decommissioned leader's
// last view (four voters, 150 ms before it was removed) was judged until
// the harness started it again 28 s later.
func TestCheckEvenVotersEndWhenTheNodeStops(t *testing.T) {
	four := []ConfigServer{srv("n1", true), srv("n2", true), srv("n3", true), srv("n4", true), srv("n5", false)}
	three := []ConfigServer{srv("n2", true), srv("n3", true), srv("n4", true), srv("n5", false)}
	for _, tc := range []struct {
		name    string
		configs []ConfigSample
		even    bool
	}{
		{"stopped 100 ms after, restarted 900 ms after", []ConfigSample{
			{Node: "n1", At: 10 * ms, Source: "live", Leader: true, Servers: four},
			{Node: "n1", At: 100 * ms, Source: "log", Index: 9, Servers: four},
			{Node: "n1", At: 900 * ms, Source: "live", Servers: three},
		}, false},
		{"held 800 ms, then stopped for good", []ConfigSample{
			{Node: "n1", At: 10 * ms, Source: "live", Leader: true, Servers: four},
			{Node: "n1", At: 800 * ms, Source: "snapshot", Index: 9, Servers: four},
		}, true},
		{"held until the end", []ConfigSample{
			{Node: "n1", At: 10 * ms, Source: "live", Leader: true, Servers: four},
		}, true},
	} {
		b := clean()
		b.h.Expect = Expect{OddVoters: true, StableFor: 500 * ms}
		b.h.Configs = tc.configs
		r := checked(t, b)
		flagged := false
		for _, v := range r.Violations {
			flagged = flagged || v.Check == CheckOddVoters
		}
		if flagged != tc.even {
			t.Errorf("%s: odd-voters flagged %v, want %v (%+v)", tc.name, flagged, tc.even, r.Violations)
		}
	}
}

func TestCheckGhostHolders(t *testing.T) {
	for _, tc := range []struct {
		name string
		es   EndState
	}{
		{"released acquisition back", EndState{Holds: []EndHold{{Lock: "x", Session: 1, Owner: "o1", Token: 3}}}},
		{"failed unlock never retried", EndState{Holds: []EndHold{{Lock: "x", Session: 1, Owner: "o9", Token: 3}}, GivenUp: []GivenUp{{Owner: "o9", Op: 4, Err: "no quorum"}}}},
		{"unknown waiter", EndState{Holds: []EndHold{{Lock: "x", Session: 2, Owner: "zz", Waiter: true}}}},
	} {
		b := clean()
		b.h.Ops[0].Owner = "o1"
		b.h.Ops[2].Owner = "o1" // its release
		b.h.EndState = &tc.es
		r := checked(t, b)
		requireViolation(t, r, CheckGhostHolder)
		t.Logf("%s: %s", tc.name, r.Violations[0].Detail)
	}
	b := clean()
	b.h.EndState = &EndState{Holds: []EndHold{{Lock: "x", Owner: "o5"}}, Known: []string{"o5"}}
	if r := checked(t, b); !r.OK() {
		t.Fatalf("a known holder flagged: %+v", r.Violations)
	}
}

func TestCheckAvailabilityProbes(t *testing.T) {
	b := clean()
	b.h.Probes = []Probe{
		{What: "after heal", Node: "n1", Lock: "p1", Start: 0, Deadline: 100 * ms, Done: 40 * ms, Resume: true},
		{What: "one voter down", Node: "n2", Lock: "p2", Start: 0, Deadline: 100 * ms, Err: "no quorum"},
	}
	r := checked(t, b)
	requireViolation(t, r, CheckAvailability)
	if r.ResumeMillis != 40 {
		t.Fatalf("resume %d ms", r.ResumeMillis)
	}
	b.h.Probes[1].Done = 200 * ms // too late
	requireViolation(t, checked(t, b), CheckAvailability)
}

func TestCheckLockDelay(t *testing.T) {
	// A's session expires holding x (lock-delay 500 ms); B is granted x
	// 100 ms later.
	b := newHB().
		op(Op{Client: 0, Kind: OpAcquire, Lock: "x", Invoke: 0, Return: 10, Result: Granted, Token: 1, ValidTo: 100}).
		ev(LogEvent{Index: 1, Kind: EvGranted, Lock: "x", Token: 1, At: 1, Observed: 5}).
		ev(LogEvent{Index: 2, Kind: EvReleased, Lock: "x", Token: 1, Reason: "session-expired", Delayed: true, At: 200, Observed: 200}).
		op(Op{Client: 1, Kind: OpAcquire, Lock: "x", Invoke: 150, Return: 310, Result: Granted, Token: 2, ValidTo: 400}).
		ev(LogEvent{Index: 3, Kind: EvGranted, Lock: "x", Token: 2, At: 300, Observed: 300}).
		op(Op{Client: 1, Kind: OpRelease, Lock: "x", Token: 2, Invoke: 400, Return: 410, Result: OK}).
		ev(LogEvent{Index: 4, Kind: EvReleased, Lock: "x", Token: 2, Reason: "owner", At: 401, Observed: 405})
	b.h.LockDelay = 500 * ms
	requireViolation(t, checked(t, b), CheckLockDelay)
	b.h.LockDelay = 50 * ms
	if r := checked(t, b); !r.OK() {
		t.Fatalf("a delay that was respected flagged: %+v (porcupine %s)", r.Violations, r.Porcupine)
	}
}

// A version-2 lock-delay (timed by the leader from its own apply) may end
// no earlier than the release was first seen plus DelayFor: 450 ms into a
// 500 ms delay is flagged, though the version-1 slack (a tenth plus 100
// ms) would let it pass; 500 ms is not.
func TestCheckLockDelayTimedByTheLeader(t *testing.T) {
	build := func(grantAt int64) *hb {
		return newHB().
			op(Op{Client: 0, Kind: OpAcquire, Lock: "x", Invoke: 0, Return: 10, Result: Granted, Token: 1, ValidTo: 100}).
			ev(LogEvent{Index: 1, Kind: EvGranted, Lock: "x", Token: 1, At: 1, Observed: 5}).
			ev(LogEvent{Index: 2, Kind: EvReleased, Lock: "x", Session: 7, Token: 1, Reason: "session-expired", Delayed: true, DelayFor: 500 * ms, At: 200, Observed: 200}).
			op(Op{Client: 1, Kind: OpAcquire, Lock: "x", Invoke: 150, Return: grantAt + 10, Result: Granted, Token: 2, ValidTo: grantAt + 100}).
			ev(LogEvent{Index: 3, Kind: EvGranted, Lock: "x", Token: 2, At: grantAt, Observed: grantAt}).
			op(Op{Client: 1, Kind: OpRelease, Lock: "x", Token: 2, Invoke: grantAt + 100, Return: grantAt + 110, Result: OK}).
			ev(LogEvent{Index: 4, Kind: EvReleased, Lock: "x", Token: 2, Reason: "owner", At: grantAt + 101, Observed: grantAt + 105})
	}
	early := build(650)
	early.h.LockDelay = 500 * ms
	requireViolation(t, checked(t, early), CheckLockDelay)
	onTime := build(700)
	onTime.h.LockDelay = 500 * ms
	if r := checked(t, onTime); !r.OK() {
		t.Fatalf("a delay that was respected flagged: %+v (porcupine %s)", r.Violations, r.Porcupine)
	}
}

// An expiry of a session the workload opened with a lock-delay must put
// the lock into lock-delay: a release the state machine did not flag as
// delayed is flagged by the check, and so is the grant that follows it too
// soon; the same release of a session without a lock-delay is not.
func TestCheckLockDelayNotStarted(t *testing.T) {
	build := func() *hb {
		return newHB().
			op(Op{Client: 0, Kind: OpAcquire, Lock: "x", Invoke: 0, Return: 10, Result: Granted, Token: 1, ValidTo: 100}).
			ev(LogEvent{Index: 1, Kind: EvGranted, Lock: "x", Session: 7, Token: 1, At: 1, Observed: 5}).
			ev(LogEvent{Index: 2, Kind: EvReleased, Lock: "x", Session: 7, Token: 1, Reason: "session-expired", At: 200, Observed: 200}).
			op(Op{Client: 1, Kind: OpAcquire, Lock: "x", Invoke: 150, Return: 310, Result: Granted, Token: 2, ValidTo: 400}).
			ev(LogEvent{Index: 3, Kind: EvGranted, Lock: "x", Session: 8, Token: 2, At: 300, Observed: 300}).
			op(Op{Client: 1, Kind: OpRelease, Lock: "x", Token: 2, Invoke: 400, Return: 410, Result: OK}).
			ev(LogEvent{Index: 4, Kind: EvReleased, Lock: "x", Session: 8, Token: 2, Reason: "owner", At: 401, Observed: 405})
	}
	b := build()
	b.h.LockDelay = 500 * ms
	b.h.DelaySessions = []uint64{7, 8}
	r := checked(t, b)
	requireViolation(t, r, CheckLockDelay)
	if n := len(r.Violations); n != 2 {
		t.Errorf("%d violations, want 2 (the release, the grant): %+v", n, r.Violations)
	}
	other := build()
	other.h.LockDelay = 500 * ms
	other.h.DelaySessions = []uint64{8}
	if r := checked(t, other); !r.OK() {
		t.Fatalf("an expiry of a session without a lock-delay flagged: %+v", r.Violations)
	}
}

// A TryLock on a partition's minority side is checked like one inside a
// quorum loss; one on the majority side is not (it may fail for other
// reasons). Before, only quorum losses were checked.
func TestCheckErrorMeaningOnAMinority(t *testing.T) {
	for _, tc := range []struct {
		node         string
		wantViolated bool
	}{{"n1", true}, {"n2", false}} {
		b := clean()
		b.h.TTL = 50 * ms
		b.h.Nemesis = []FaultEvent{{Kind: "partition", Target: "[0] [1 2]", Start: 300 * ms, End: 600 * ms, Cut: []string{"n1"}}}
		b.op(Op{Client: 3, Node: tc.node, Kind: OpTryAcquire, Lock: "y", Invoke: 310, Return: 320, Result: Fail, Err: "context deadline exceeded", ErrKind: ErrDeadline, Deadline: 400 * ms})
		got := false
		for _, v := range checked(t, b).Violations {
			got = got || v.Check == CheckErrorMeaning
		}
		if got != tc.wantViolated {
			t.Errorf("a bare deadline on %s (minority: n1): error-meaning violated %v, want %v", tc.node, got, tc.wantViolated)
		}
	}
}

func TestCheckErrorMeaningAndBoundedCalls(t *testing.T) {
	b := clean()
	b.h.TTL = 50 * ms
	b.h.Nemesis = []FaultEvent{{Kind: "quorum-loss", Start: 300 * ms, End: 600 * ms}}
	b.op(Op{Client: 3, Kind: OpTryAcquire, Lock: "y", Invoke: 310, Return: 320, Result: Fail, Err: "context deadline exceeded", ErrKind: ErrDeadline, Deadline: 400 * ms})
	requireViolation(t, checked(t, b), CheckErrorMeaning)
	b = clean()
	b.h.TTL = 50 * ms
	b.op(Op{Client: 3, Kind: OpTryAcquire, Lock: "y", Invoke: 310, Return: 900, Result: Fail, ErrKind: ErrNoQuorum, Deadline: 400 * ms})
	requireViolation(t, checked(t, b), CheckBoundedCall)
	b = clean()
	b.h.TTL = 50 * ms
	b.op(Op{Client: 3, Kind: OpAcquire, Lock: "y", Invoke: 310, Return: 900, Result: Fail, ErrKind: ErrSessionExpired, SessionEnded: 400 * ms})
	requireViolation(t, checked(t, b), CheckBoundedCall)
	b = clean()
	b.h.TTL = 50 * ms
	b.h.Nemesis = []FaultEvent{{Kind: "quorum-loss", Start: 300 * ms, End: 600 * ms}}
	b.op(Op{Client: 3, Kind: OpTryAcquire, Lock: "y", Invoke: 310, Return: 320, Result: Fail, ErrKind: ErrNoQuorum, Deadline: 400 * ms})
	if r := checked(t, b); !r.OK() {
		t.Fatalf("a no-quorum error flagged: %+v", r.Violations)
	}
}

// A pause of the call's replica excuses only as much lateness as it
// overlapped the call: before, any overlap (1 ms) excused any lateness.
func TestCheckBoundedCallsAllowOnlyThePause(t *testing.T) {
	for _, tc := range []struct {
		name         string
		pause        [2]int64 // ms
		ret          int64    // ms; deadline 400, TTL 50
		wantViolated bool
	}{
		{"1 ms of pause, 500 ms late", [2]int64{390, 391}, 900, true},
		{"pause before the call", [2]int64{100, 300}, 900, true},
		{"400 ms of pause, 450 ms late", [2]int64{350, 750}, 850, false},
		{"400 ms of pause, 500 ms late", [2]int64{350, 750}, 900, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := clean()
			b.h.TTL = 50 * ms
			b.h.Nemesis = []FaultEvent{{Kind: "sigstop", Target: "n1", Start: tc.pause[0] * ms, End: tc.pause[1] * ms}}
			b.op(Op{Client: 3, Node: "n1", Kind: OpTryAcquire, Lock: "y", Invoke: 310, Return: tc.ret, Result: Fail, ErrKind: ErrNoQuorum, Deadline: 400 * ms})
			r := checked(t, b)
			got := false
			for _, v := range r.Violations {
				got = got || v.Check == CheckBoundedCall
			}
			if got != tc.wantViolated {
				t.Fatalf("bounded-call violated %v, want %v: %+v", got, tc.wantViolated, r.Violations)
			}
		})
	}
}

func TestCheckStampsUnreliable(t *testing.T) {
	// A leader whose clock runs a day ahead stamps the release: with the
	// stamps declared unreliable, the observation times are used.
	b := clean()
	day := int64(24 * time.Hour)
	for i := range b.h.Log {
		b.h.Log[i].At += day
	}
	if r := checked(t, b); r.OK() {
		t.Fatal("skewed stamps passed as real times")
	}
	b.h.StampsUnreliable = true
	if r := checked(t, b); !r.OK() {
		t.Fatalf("skewed stamps, declared: %+v (porcupine %s)", r.Violations, r.Porcupine)
	}
}
