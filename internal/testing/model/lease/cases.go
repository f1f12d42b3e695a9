package lease

// Case is a configuration and the verdict expected of it: every property
// holds (Want ""), or the checker finds a counterexample to Want.
type Case struct {
	Config
	Want string // "", "P1" … "P6", "Live"
	Why  string // what the case shows
}

// Scale selects the size of the catalogue's bounds.
type Scale int

// Scales.
const (
	ScaleRace Scale = iota // CI under the race detector (about ten times slower)
	ScaleCI                // CI without the race detector
	ScaleDeep              // the chaos long run (RAFTLOCK_MODEL_DEEP=1)
)

// Catalogue returns the checks: the design of the fixes (every property
// holds), today's design (the defects of issue 45 items 4, 7, 8 and 9, and
// what the model found besides), and a mutant for every property.
func Catalogue(sc Scale) []Case {
	pick := func(race, ci, deep int) int {
		switch sc {
		case ScaleRace:
			return race
		case ScaleCI:
			return ci
		}
		return deep
	}
	fx := Fixed()
	with := func(v Variant, f func(*Variant)) Variant { f(&v); return v }
	lw := []ClientKind{Lease, Immortal}
	ii := []ClientKind{Immortal, Immortal}

	// held: the first client holds the lock and the second waits; the
	// clients never let go on their own (only lapses end the hold).
	held := func(name string, p Params, v Variant, clients []ClientKind, b Bounds) Config {
		b.Held, b.NoClose, b.Passive = true, true, true
		return Config{Name: name, Params: p, Variant: v, Clients: clients, Bounds: b}
	}
	// dead: as held, and a lapsed holder sends nothing more (it crashed).
	dead := func(name string, p Params, v Variant, b Bounds) Config {
		b.NoLoseClose, b.NoLapsedRelease, b.Timely = true, true, true
		return held(name, p, v, lw, b)
	}
	// opening: the lease client opens its session (while a leader may be
	// taking over), then both clients ask for the lock.
	opening := func(name string, v Variant) Config {
		p := SmallParams()
		p.EpsNum = 0
		return Config{Name: name, Params: p, Variant: v, Clients: lw, Bounds: Bounds{Changes: 1, KA: pick(0, 1, 1), Sends: 1,
			Acquires: 1, Open: true, SlowTakeover: true, NoClose: true, Passive: true, NoLoseClose: true, NoLapsedRelease: true}}
	}
	def, small := DefaultParams(), SmallParams()
	stale := func(p Params, n int) Params { p.StaleAck = n; return p }

	var out []Case
	add := func(want, why string, c Config) {
		if want == "P1" {
			// Without a lock-delay a grant follows an early expiry at
			// once; a delay would show a small violation of P1 as one of
			// P3 (which these cases are not about).
			c.Params.LockDelay = 0
		}
		out = append(out, Case{Config: c, Want: want, Why: why})
	}

	// The design of the fixes: every property holds.
	add("", "a holder with keepalives, a waiter, leader changes, clock rates within 5 % (margin TTL/20), lapses noticed by the client",
		held("fixed/lease", def, fx, lw, Bounds{Changes: pick(1, 1, 3), KA: pick(1, 1, 2)}))
	nd := held("fixed/lease-no-delay", def, fx, lw, Bounds{Changes: pick(1, 1, 3), KA: pick(1, 1, 2)})
	nd.Params.LockDelay = 0
	add("", "as fixed/lease without a lock-delay (a delay could hide an early expiry from P1)", nd)
	add("", "an HTTP client-kept lease whose keeper releases it when the HTTP client stops asking",
		held("fixed/keeper", small, fx, []ClientKind{Keeper, Immortal}, Bounds{Changes: pick(0, 0, 1), KA: 1}))
	add("", "a holder under leader churn: a silent session ends within Bound4 and its lock passes within BoundLive, for any number of changes (P4, liveness)",
		dead("fixed/churn", small, fx, Bounds{Changes: pick(2, 3, 7), KA: 1}))
	add("", "sessions opened while a new leader takes over (issue 45 item 8)", opening("fixed/open-during-takeover", fx))
	add("", "operator revoke and end-session take a lock from a live holder: the documented exception, nothing else",
		held("fixed/operator", small, fx, lw, Bounds{Changes: pick(0, 0, 1), KA: pick(0, 1, 1), Sends: 1, Revokes: 1, Ends: 1}))
	opx := held("exception/operator-overlap", small, fx, lw, Bounds{KA: 0, Revokes: 1, Ends: 1})
	opx.NoException = true
	add("P1", "without the documented exception, a revoke or end-session overlaps a live holder's window: the exception is what fixed/operator needs", opx)
	add("", "a restore of an older backup: tokens keep increasing (P2)",
		Config{Name: "fixed/restore", Params: small, Variant: fx, Clients: ii, Bounds: Bounds{Changes: pick(0, 0, 1), Acquires: 1, Restores: 1, NoClose: true}})
	rb := Config{Name: "fixed/rebuild", Params: small, Variant: fx, Clients: []ClientKind{Immortal},
		Bounds: Bounds{Changes: 1, Acquires: 2, Rebuild: true, Horizon: pick(1, 2, 4), NoClose: true}}
	rb.Params.Wall = 1
	add("", "a cluster rebuilt from empty data dirs: tokens keep increasing within the stated wall-clock bound (P2)", rb)
	add("", "duplicate deliveries of a session's acquisitions across a leader change (P5)",
		Config{Name: "fixed/exactly-once", Params: small, Variant: fx, Clients: []ClientKind{Immortal}, Bounds: Bounds{Changes: 1, Acquires: 2, Dups: 1}})
	add("", "duplicate deliveries with two sessions contending (P5)",
		Config{Name: "fixed/exactly-once-contended", Params: small, Variant: fx, Clients: ii, Bounds: Bounds{Changes: pick(0, 0, 1), Acquires: 2, Dups: 1, NoClose: true}})
	add("", "a semaphore of 2 permits asked for 1, 2 and 1 (P6)",
		Config{Name: "fixed/semaphore", Params: small, Variant: fx, Clients: []ClientKind{Immortal, Immortal, Immortal},
			Bounds: Bounds{Acquires: pick(1, 1, 2), Limit: 2, Permits: []int{1, 2, 1}}})

	// Today's design (main at 546bfcd).
	add("P3", "issue 45 item 4: Session.lose's CloseSession after a lapse releases without the lock-delay",
		held("today/lose-close", def, Today(), lw, Bounds{KA: 1, Sends: 1, NoLapsedRelease: true}))
	add("P3", "found by the model: Lease.Unlock of a lost lease (releaseAfterEnd) releases without the lock-delay",
		held("today/unlock-lost", def, Today(), lw, Bounds{KA: 1, Sends: 1, NoLoseClose: true}))
	add("P3", "issue 45 item 4: the HTTP keeper's release of an unrenewed client-kept lease skips the lock-delay",
		held("today/keeper", small, Today(), []ClientKind{Keeper, Immortal}, Bounds{KA: 1, Sends: 1, NoLoseClose: true, NoLapsedRelease: true}))
	add("P4", "issue 45 item 9: every new leader grants a silent session TTL + election timeout again",
		dead("today/churn", small, with(Today(), func(v *Variant) { v.DelayCredit = true }), Bounds{Changes: 3, KA: 1}))
	add("Live", "found by the model: every new leader times a pending lock-delay again in full, so churn keeps the lock from its waiter",
		dead("today/delay-churn", small, with(fx, func(v *Variant) { v.DelayCredit = false }), Bounds{Changes: 2, KA: 1}))
	add("P1", "issue 45 item 8: a session opened during a takeover gets its deadline from the takeover's read of the clock",
		opening("today/open-during-takeover", with(fx, func(v *Variant) { v.ReplayTime, v.RenewPerTerm = false, false })))
	add("P1", "issue 45 item 7: a deposed leader acknowledges keepalives on evidence older than the grace covers",
		held("today/stale-evidence", stale(def, 2), fx, lw, Bounds{Changes: 1, KA: 1, Sends: 1}))

	// Mutants: one mistake each.
	add("P1", "margin 0: the client counts a full TTL while a leader's clock runs 5 % fast",
		held("mutant/margin-0", def, with(fx, func(v *Variant) { v.NoMargin = true }), lw, Bounds{KA: 1, Sends: 1}))
	rate := def
	rate.EpsNum, rate.EpsDen = 3, 50
	add("P1", "clock rates 6 % apart, above margin/(TTL − margin) = 5.3 %",
		held("mutant/rate-6pc", rate, fx, lw, Bounds{KA: 1, Sends: 1}))
	add("P1", "a takeover grace without the election timeout, when a deposed leader may acknowledge a keepalive a tick after the election",
		held("mutant/grace-without-election-timeout", stale(def, 1), with(fx, func(v *Variant) { v.GraceNoET = true }), lw,
			Bounds{Changes: 1, KA: 1, Sends: 1}))
	wall := small
	wall.Wall = 1
	add("P3", "a lock-delay timed on the leaders' wall clocks (offsets of ±1 tick)",
		held("mutant/wall-clock-delay", wall, with(fx, func(v *Variant) { v.WallDelay = true }), lw, Bounds{Changes: 1, KA: 1, Sends: 1}))
	add("P3", "a close after a lapse that skips the lock-delay",
		held("mutant/close-skips-delay", def, with(fx, func(v *Variant) { v.SkipLapseDelay = true }), lw,
			Bounds{KA: 1, Sends: 1, NoLapsedRelease: true}))
	add("P2", "a restore that installs the backup's token counter as it is",
		Config{Name: "mutant/restore-without-max", Params: small, Variant: with(fx, func(v *Variant) { v.RestoreNoMax = true }),
			Clients: ii, Bounds: Bounds{Acquires: 1, Restores: 1, NoClose: true}})
	rbBehind := rb
	rbBehind.Name, rbBehind.Bounds.BehindClock = "exception/rebuild-clock-behind", true
	add("P2", "outside the stated bound: the new cluster's leader's wall clock is behind the old one's", rbBehind)
	rbNoRaise := rb
	rbNoRaise.Name, rbNoRaise.Variant.NoRaise = "mutant/rebuild-without-raise", true
	add("P2", "a new leader that does not raise the token counter to its wall clock", rbNoRaise)
	add("P4", "a takeover grace renewed at every leader change, with no bound",
		dead("mutant/grace-reset-unbounded", small, with(fx, func(v *Variant) { v.RenewPerTerm = false }), Bounds{Changes: 3, KA: 1}))
	add("P5", "duplicates without the request floor (results dropped at the ack floor, older requests executed again)",
		Config{Name: "mutant/duplicate-without-floor", Params: small, Variant: with(fx, func(v *Variant) { v.NoFloor = true }),
			Clients: []ClientKind{Immortal}, Bounds: Bounds{Acquires: 2, Dups: 1}})
	add("P6", "an acquisition granted because it fits, though others wait (barging)",
		Config{Name: "mutant/semaphore-barging", Params: small, Variant: with(fx, func(v *Variant) { v.Barging = true }),
			Clients: []ClientKind{Immortal, Immortal, Immortal}, Bounds: Bounds{Acquires: 1, Limit: 2, Permits: []int{1, 2, 1}}})
	add("P1", "a leadership confirmation that counts replies to messages sent before the keepalive arrived (evidence 3 ticks stale)",
		held("mutant/stale-confirmation", stale(def, 3), fx, lw, Bounds{Changes: 1, KA: 1, Sends: 1}))
	add("P1", "a marked session's keepalive acknowledged before its Renewed entry commits",
		held("mutant/ack-before-renewed", small, with(fx, func(v *Variant) { v.AckBeforeRenewed = true }), lw, Bounds{Changes: 2, KA: 1, Sends: 1}))
	// Under the race detector with TTL 6 ticks (a third of the states).
	rs := small
	if sc == ScaleRace {
		rs.TTL, rs.Election = 6, 1
	}
	add("P1", "a keepalive acknowledged once the state machine shows its session renewed — by another leader's Renewed entry — instead of once its own entry commits",
		held("mutant/renewed-in-state", rs, with(fx, func(v *Variant) { v.RenewedInState = true }), lw, Bounds{Changes: 2, KA: 2, Sends: 2}))
	return out
}
