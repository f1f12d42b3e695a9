package lease

import "fmt"

// Params are the protocol's durations in ticks (the model's unit of real
// time) and the clock-rate bound. A tick is TTL/20 when TTL is 20: with a
// 4.5 s TTL (the smallest LANTiming allows) a tick is 225 ms.
type Params struct {
	TTL       int // session TTL, on the leader's clock
	Margin    int // the client's margin: its window is TTL − Margin of its last successful keepalive's send time
	Election  int // Timing.ElectionTimeout: the takeover grace is TTL + Election
	LockDelay int // the sessions' lock-delay (0: none)

	// Clock rates differ by at most ε = EpsNum/EpsDen: the slowest clock
	// runs at the rate of real time, the fastest at 1 + ε. A duration d
	// timed on a fast clock lasts floor(d / (1 + ε)) ticks of real time
	// (rounded down: the model is never kinder than the clock).
	EpsNum, EpsDen int

	// StaleAck is how many ticks after the next leader's election a
	// deposed leader may still acknowledge a keepalive that arrives then
	// (0: none after the election): the age of the leadership evidence a
	// confirmation may rest on, less the time a follower waits before it
	// votes. 0 when every confirmation rests on replies to messages sent
	// after the keepalive arrived.
	StaleAck int

	// Wall is the largest offset of a leader's wall clock from real time,
	// in ticks (the lock-delay-on-a-wall-clock mutant and the token floor).
	Wall int

	// MaxAge drops a keepalive or its reply that is older than this many
	// ticks (the network's delay bound; a message may also be lost at
	// once).
	MaxAge int

	// The timeliness bounds, enforced only in Timely configurations (the
	// liveness checks): a leader's proposal commits within Commit ticks
	// unless the leader is deposed; the cluster is without a leader that
	// has taken over for at most Outage ticks at a time; a leader that has
	// taken over leads for at least MinLead ticks (enough to commit what
	// it proposes at once: without it, leaders deposed as soon as they
	// take over commit nothing, and nothing can be bounded).
	Commit, Outage, MinLead int
}

// DefaultParams are the parameters of the CI configurations.
func DefaultParams() Params {
	return Params{TTL: 20, Margin: 1, Election: 2, LockDelay: 3, EpsNum: 1, EpsDen: 20, MaxAge: 2, Commit: 1, Outage: 3, MinLead: 2}
}

// SmallParams are coarser: TTL 10 ticks, the margin TTL/10 and clock rates
// within 10 % (under margin/(TTL − margin) = 11 %, as 5 % is under the 5.3 %
// of DefaultParams). The checks whose subject is not the margin run on
// them: a state space several times smaller.
func SmallParams() Params {
	p := DefaultParams()
	p.TTL, p.Margin, p.EpsNum, p.EpsDen = 10, 1, 1, 10
	return p
}

// Validate refuses parameters the model cannot represent.
func (p Params) Validate() error {
	switch {
	case p.TTL < 2 || p.TTL > 60:
		return fmt.Errorf("lease: TTL %d outside [2, 60]", p.TTL)
	case p.Margin < 0 || p.Margin >= p.TTL:
		return fmt.Errorf("lease: margin %d outside [0, TTL)", p.Margin)
	case p.Election < 0 || p.LockDelay < 0 || p.StaleAck < 0 || p.Wall < 0 || p.Wall > 20:
		return fmt.Errorf("lease: negative duration or wall offset beyond 20")
	case p.TTL+p.Election > 120 || p.LockDelay > 60:
		return fmt.Errorf("lease: durations too long for the state's counters")
	case p.EpsNum < 0 || (p.EpsNum > 0 && p.EpsDen <= 0):
		return fmt.Errorf("lease: bad clock-rate bound %d/%d", p.EpsNum, p.EpsDen)
	case p.MaxAge < 1 || p.MaxAge > 40:
		return fmt.Errorf("lease: MaxAge %d outside [1, 40]", p.MaxAge)
	case p.Commit < 1 || p.Outage < 1 || p.MinLead <= p.Commit || p.MinLead > 20:
		return fmt.Errorf("lease: Commit and Outage must be at least 1, MinLead in (Commit, 20]")
	}
	return nil
}

// onClock returns the real duration of d ticks timed on a clock of the
// given rate (fast: 1 + ε).
func (p Params) onClock(d int, fast bool) int {
	if !fast || p.EpsNum == 0 {
		return d
	}
	return d * p.EpsDen / (p.EpsDen + p.EpsNum)
}

// Variant selects the design, and the mistakes, the model runs. The zero
// Variant is today's design (main at 546bfcd); Fixed is the design of the
// fixes; a mutant is Fixed (or today's) with one mistake added.
type Variant struct {
	// LapsedEnd: a close or release sent after the client's validity
	// lapsed (Session.lose, Lease.Unlock of a lost lease, the HTTP
	// keeper's release of an unrenewed lease) carries Lapsed and has
	// expiry semantics: the lock-delay starts (issue 45 item 4).
	LapsedEnd bool
	// RenewPerTerm: every takeover barrier marks every session; a
	// keepalive of a marked session is acknowledged only once a Renewed
	// entry naming it committed; a new leader times an unrenewed session
	// from its own apply time of the first marker after the session's last
	// renewal (issue 45 item 9).
	RenewPerTerm bool
	// DelayCredit: a new leader times a pending lock-delay from its own
	// apply time of the entry that started it, not in full from its
	// takeover.
	DelayCredit bool
	// ReplayTime: a session opened while a new leader takes over gets its
	// deadline from when it is replayed, not from the takeover's read
	// (issue 45 item 8).
	ReplayTime bool

	// Mistakes.
	NoMargin         bool // the client counts TTL, not TTL − margin
	GraceNoET        bool // the takeover grace is TTL, without the election timeout
	WallDelay        bool // lock-delays end at a leader wall-clock time recorded in the state
	SkipLapseDelay   bool // with LapsedEnd: a lapsed close still skips the lock-delay
	RestoreNoMax     bool // a restore installs the backup's token counter as it is
	NoFloor          bool // exactly-once: results are dropped at the ack floor but requests below it execute again
	Barging          bool // a new acquisition that fits is granted though others wait
	AckBeforeRenewed bool // with RenewPerTerm: a marked session's keepalive is acknowledged without waiting for its Renewed entry
	RenewedInState   bool // with RenewPerTerm: a keepalive waiting for its Renewed entry is acknowledged once the state machine shows the session renewed (by any leader's entry), not once its own entry commits
	NoRaise          bool // a new leader does not raise the token counter to its wall clock
}

// Fixed is the design of the fixes: today's protocol with LapsedEnd,
// RenewPerTerm, DelayCredit and ReplayTime, and confirmations that rest on
// fresh evidence (Params.StaleAck 0).
func Fixed() Variant {
	return Variant{LapsedEnd: true, RenewPerTerm: true, DelayCredit: true, ReplayTime: true}
}

// Today is the design of main at 546bfcd.
func Today() Variant { return Variant{} }
