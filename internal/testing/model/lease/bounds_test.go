package lease

import "testing"

// churnCase returns the fixed/churn check with 3 leader changes and one
// keepalive (the least that reaches Bound4: the holder's last keepalive
// is accepted by a leader that took over just before it).
func churnCase(t *testing.T) Config {
	t.Helper()
	for _, c := range Catalogue(ScaleCI) {
		if c.Name == "fixed/churn" {
			c.Bounds.Changes, c.Bounds.Sends = 3, 1
			return c.Config
		}
	}
	t.Fatal("no fixed/churn case")
	return Config{}
}

// TestBoundsAreReached shows Bound4 and BoundLive exact in the model: the
// worst schedules reach them, and a bound one tick shorter is broken.
// CI cost: about 0.3 million states, 1 s (about 10 s under -race).
func TestBoundsAreReached(t *testing.T) {
	cfg := churnCase(t)
	r, err := Check(cfg)
	if err != nil || r.Violation != nil {
		t.Fatalf("fixed/churn: %v %v", err, r.Violation)
	}
	p := cfg.Params
	if r.WorstSilent != p.Bound4() || r.WorstWait != p.BoundLive() {
		t.Fatalf("worst silence %d (Bound4 %d), worst wait %d (BoundLive %d)", r.WorstSilent, p.Bound4(), r.WorstWait, p.BoundLive())
	}
	for _, tc := range []struct {
		name, want string
		p4, live   int
	}{
		{"Bound4 − 1", "P4", p.Bound4() - 1, p.BoundLive()},
		{"BoundLive − 1", "Live", p.Bound4(), p.BoundLive() - 1},
	} {
		c := cfg
		c.Name, c.P4, c.Live = tc.name, tc.p4, tc.live
		r, err := Check(c)
		if err != nil {
			t.Fatal(err)
		}
		if r.Violation == nil || r.Violation.Prop != tc.want {
			t.Fatalf("%s: %v, want a violation of %s", tc.name, r.Violation, tc.want)
		}
		t.Logf("%s: %d-step counterexample:\n%s", tc.name, r.Steps(), r.Schedule())
	}
}

// TestRateThreshold: with the margin TTL/20, clock rates may differ by up
// to margin/(TTL − margin) = 1/19 ≈ 5.3 %, and no more. CI cost: a few
// thousand states.
func TestRateThreshold(t *testing.T) {
	for _, tc := range []struct {
		num, den int
		want     string
	}{
		{0, 1, ""},
		{1, 20, ""},
		{1, 19, ""},
		{3, 50, "P1"},
		{1, 10, "P1"},
	} {
		p := DefaultParams()
		p.EpsNum, p.EpsDen, p.LockDelay = tc.num, tc.den, 0
		c := Config{Name: "rates", Params: p, Variant: Fixed(), Clients: []ClientKind{Lease, Immortal},
			Bounds: Bounds{Held: true, NoClose: true, Passive: true, KA: 1, Sends: 2}}
		r, err := Check(c)
		if err != nil {
			t.Fatal(err)
		}
		if got := r.Verdict(); got != tc.want {
			t.Fatalf("ε = %d/%d: %q, want %q\n%s", tc.num, tc.den, got, tc.want, r.Schedule())
		}
	}
}

// TestStaleEvidenceThreshold: how old the evidence of a deposed leader's
// confirmation may be (StaleAck ticks past the next election) before P1
// breaks — the takeover grace's election timeout is what absorbs it.
// CI cost: about 0.3 million states, 1 s.
func TestStaleEvidenceThreshold(t *testing.T) {
	for _, tc := range []struct {
		stale     int
		graceNoET bool
		want      string
	}{
		{0, false, ""},
		{1, false, ""},
		{2, false, "P1"},
		{0, true, ""},
		{1, true, "P1"},
	} {
		p := DefaultParams()
		p.StaleAck, p.LockDelay = tc.stale, 0
		v := Fixed()
		v.GraceNoET = tc.graceNoET
		c := Config{Name: "stale", Params: p, Variant: v, Clients: []ClientKind{Lease, Immortal},
			Bounds: Bounds{Held: true, NoClose: true, Passive: true, KA: 1, Sends: 1, Changes: 1}}
		r, err := Check(c)
		if err != nil {
			t.Fatal(err)
		}
		if got := r.Verdict(); got != tc.want {
			t.Fatalf("StaleAck %d (grace without ET %v): %q, want %q\n%s", tc.stale, tc.graceNoET, got, tc.want, r.Schedule())
		}
	}
}
