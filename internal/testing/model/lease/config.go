package lease

import "fmt"

// ClientKind is what kind of client a session belongs to.
type ClientKind uint8

// Client kinds of a configuration.
const (
	// Lease is a lockapi session: keepalives, a validity window on its own
	// clock, Session.lose and Lease.Unlock after a lapse.
	Lease = ClientKind(kindLease)
	// Keeper is an HTTP client's client-kept lease: its window is the
	// session's validity and the time by which the HTTP client must ask
	// about it again; the admin API's keeper releases it when the HTTP
	// client does not.
	Keeper = ClientKind(kindKeeper)
	// Immortal is a session whose keepalives always succeed (not
	// modelled): a waiter, or the clients of the state-machine properties.
	Immortal = ClientKind(kindImmortal)
)

// Bounds are the limits of one exhaustive check.
type Bounds struct {
	Changes  int   // leader changes
	Acquires int   // acquisitions per client
	KA       int   // keepalives of one client in flight (≤ 2)
	Limit    int   // a semaphore of this many permits (0: an exclusive lock)
	Permits  []int // the permits each client asks for (semaphore)
	Open     bool  // the Lease and Keeper clients start without a session and open one
	Held     bool  // the first client holds the lock at the start and the others wait, in order
	Sends    int   // keepalives each Lease or Keeper client sends in all (0: no limit)
	Revokes  int   // operator revokes
	Ends     int   // operator EndSession calls
	Restores int   // backups taken and restored
	Dups     int   // duplicate deliveries of a client's request, per client
	Timely   bool  // leaders act and commit within the Params' bounds (P4 and liveness are checked)
	// Rebuild: the cluster may be rebuilt from empty data dirs once, within
	// Horizon ticks; tokens are absolute and every leader raises the
	// counter to its wall clock (tokensPerTick a tick) at its takeover.
	// Within the stated bound — fewer grants than tokensPerTick in any
	// tick, and the new cluster's leaders' clocks not behind the old
	// one's — P2 holds across the rebuild; BehindClock lifts the second
	// half of that bound.
	Rebuild         bool
	Horizon         int
	BehindClock     bool
	NoClose         bool // clients never close their sessions voluntarily
	Passive         bool // clients never unlock or withdraw voluntarily either (fewer states where that does not matter)
	SlowTakeover    bool // a new leader may install its deadlines any time after its takeover's read (issue 45 item 8)
	NoLapsedRelease bool // Lease.Unlock of a lost lease is not modelled
	NoLoseClose     bool // Session.lose's CloseSession is not modelled
	MaxStates       int  // stop after this many states (0: no limit)

	// The semantics a real run is checked against (trace validation,
	// Conform; each also runs in the exhaustive checker, which shows that
	// the properties still hold with it, fixed/trace-semantics):
	//
	// Edges: a deadline or a client's window ends somewhere within the
	// tick at whose start its countdown reached 0, not at its start. The
	// leader may still accept a keepalive in that tick (aArriveEdge) and
	// the client is still valid until it lapses (aLapse), which it must
	// before the next tick: a grant in that tick opens its hold, and an
	// open committed in it gives it a window of 0 (one committed later:
	// lost).
	Edges bool
	// LateDuties: a leader's duties (install its takeover, propose an
	// expiry or an EndDelay) may come any time after they are due, not at
	// once (step.due): a reduction the exhaustive checker makes, not a rule
	// of the protocol.
	LateDuties bool
	// DeposedRefusals: a leader that does not know it was deposed may
	// refuse a keepalive (its deadline passed, or it proposed the expiry)
	// and the client is lost (aRefuseOld): a deposed leader's memory is
	// not modelled, so any refusal of it is allowed — it only ends a
	// client's window early.
	DeposedRefusals bool
	// Trace: a run is being replayed (Conform): Edges, LateDuties and
	// DeposedRefusals, no bound on the number of leader changes,
	// acquisitions, keepalives or revokes, and the log's entries are
	// proposed by the replay (in the order of the run's log) rather than
	// by the steps that decide them — a client's command, a leader's
	// barrier, expiry, EndDelay and Renewed.
	Trace bool
}

// Config is one exhaustive check: the protocol's parameters, the design
// variant, the clients and the bounds.
type Config struct {
	Name    string
	Params  Params
	Variant Variant
	Clients []ClientKind
	Bounds  Bounds
	// P4 and Live override the bounds checked in Timely configurations
	// (0: Bound4 and BoundLive of the parameters).
	P4, Live int
	// NoException checks P1 and P3 without the operator exception: the
	// operator actions' overlaps then count (to show that the exception is
	// what they need, and that the checks reach them).
	NoException bool
}

// Validate refuses a configuration the model cannot run.
func (c Config) Validate() error {
	if err := c.Params.Validate(); err != nil {
		return err
	}
	b := c.Bounds
	switch {
	case len(c.Clients) == 0 || len(c.Clients) > maxClients:
		return fmt.Errorf("lease: %d clients (1 to %d)", len(c.Clients), maxClients)
	case b.KA < 0 || b.KA > maxKA:
		return fmt.Errorf("lease: %d keepalives in flight (0 to %d)", b.KA, maxKA)
	case b.Changes < 0 || b.Changes > 20 || b.Acquires < 0 || b.Acquires > 3:
		return fmt.Errorf("lease: changes or acquisitions out of range")
	case b.Limit < 0 || b.Limit > 3 || (b.Limit > 0 && len(b.Permits) != len(c.Clients)):
		return fmt.Errorf("lease: a semaphore needs a limit of 1 to 3 and the permits of every client")
	case b.Dups < 0 || b.Dups > 2:
		return fmt.Errorf("lease: %d duplicates (0 to 2)", b.Dups)
	case b.Rebuild && (b.Horizon < 1 || b.Horizon*tokensPerTick+c.Params.Wall+2*maxClients*b.Acquires > 250):
		return fmt.Errorf("lease: a rebuild needs a horizon of 1 to about %d ticks", 240/tokensPerTick)
	case c.Params.StaleAck > 0 && c.Variant.RenewPerTerm && b.Timely:
		return fmt.Errorf("lease: stale acknowledgements are a safety experiment, not a timely one")
	}
	for _, k := range c.Clients {
		if k < Lease || k > Immortal {
			return fmt.Errorf("lease: unknown client kind %d", k)
		}
	}
	for _, p := range b.Permits {
		if p < 1 || p > b.Limit {
			return fmt.Errorf("lease: a client asks for %d permits of %d", p, b.Limit)
		}
	}
	return nil
}

// Bound4 is the bound P4 states for the design of the fixes: a session
// that a leader last heard from at T is expired (its ExpireSessions
// committed) by T + Bound4, whatever the number of leader changes, in a
// Timely configuration (see Params: Commit, Outage, MinLead):
//
//	Bound4 = 2·(TTL + ElectionTimeout) + 2·Outage + 3·Commit
//
// (the package documentation gives the argument; the checker reports the
// largest delay it found, and that the bound is reached).
func (p Params) Bound4() int {
	return 2*(p.TTL+p.Election) + 2*p.Outage + 3*p.Commit
}

// BoundLive is the liveness bound: once the lock has waiters and no
// holder, the first waiter is granted within LockDelay + Outage +
// 2·Commit ticks, whatever the number of leader changes (with
// Variant.DelayCredit).
func (p Params) BoundLive() int {
	return p.LockDelay + p.Outage + 2*p.Commit
}
