package fsm

import (
	"fmt"

	"github.com/raftlock/raftlock/internal/fsmwire"
)

// Commands proposed by the leader itself (Op.LeaderOnly). A replica refuses
// them from clients; the state machine cannot tell who proposed a command,
// so the node enforces it.

// ExpireSessions ends sessions whose lease ran out; proposed by the leader.
// Like CloseSession, except that locks held by a session with a lock-delay
// enter that delay instead of passing to their next waiter. Unknown sessions
// are skipped. Result: StatusOK with Count = number of sessions expired.
type ExpireSessions struct {
	Sessions []SessionID
}

// Tick is the leader's takeover barrier (from cluster version 4: Takeover,
// renewed.go). At cluster version 1 it also ends
// every lock-delay that is over at the entry's time and grants the delayed
// locks to their waiters (Count = delays ended); from cluster version 2
// lock-delays end only with EndDelay and Tick changes nothing. Result:
// StatusOK.
type Tick struct{}

// Noop changes nothing. Result: StatusOK.
type Noop struct{}

// DelayRef names one lock-delay: the lock, and the token of the grant whose
// expiry started the delay (which tells one delay of a lock from a later
// one). Token 0 names a delay that began at cluster version 1.
type DelayRef struct {
	Lock  string
	Token Token
}

// EndDelay ends lock-delays and grants the locks to their first live
// waiters, in the order given. The leader proposes it when the delay it
// timed on its monotonic clock is over (cluster version 2). A reference to
// a delay that does not exist any more (ended, or a later delay of the same
// lock) is skipped. Result: StatusOK with Count = delays ended.
type EndDelay struct {
	Delays []DelayRef
}

// SetLimits replaces the replicated quotas (see Limits). The leader proposes
// its configured limits when they differ from the state machine's. Quotas
// apply to later commands; state already beyond a new limit stays. Result:
// StatusOK.
type SetLimits struct {
	Limits Limits
}

// SetClusterVersion raises the cluster version, which selects the
// semantics of every later command and the encodings the leader may write
// (see doc.go). The leader proposes it once every server of the
// configuration supports the version. It never lowers the version
// (StatusInvalid); the version in force → StatusOK, nothing changes. A
// version beyond MaxClusterVersion halts this replica (it cannot apply
// what follows). Result: StatusOK.
type SetClusterVersion struct {
	Version uint64
}

// InitCluster records the cluster's id. Result: StatusOK if no id was set
// (it is set now) or the same id is set; StatusInvalid if another id is set.
type InitCluster struct {
	ID string
}

// Op implements Command.
func (ExpireSessions) Op() fsmwire.Op { return fsmwire.OpExpireSessions }

// Op implements Command.
func (Tick) Op() fsmwire.Op { return fsmwire.OpTick }

// Op implements Command.
func (Noop) Op() fsmwire.Op { return fsmwire.OpNoop }

// Op implements Command.
func (EndDelay) Op() fsmwire.Op { return fsmwire.OpEndDelay }

// Op implements Command.
func (SetLimits) Op() fsmwire.Op { return fsmwire.OpSetLimits }

// Op implements Command.
func (SetClusterVersion) Op() fsmwire.Op { return fsmwire.OpSetClusterVersion }

// Op implements Command.
func (InitCluster) Op() fsmwire.Op { return fsmwire.OpInitCluster }

// Validate implements Command.
func (c ExpireSessions) Validate() error { return validateSessionList(c, c.Sessions) }

// validateSessionList checks the session list of c (ExpireSessions,
// Renewed): at most MaxExpireSessions valid ids.
func validateSessionList(c Command, ids []SessionID) error {
	if len(ids) > fsmwire.MaxExpireSessions {
		return fmt.Errorf("%w: %d sessions in one %s (max %d)", fsmwire.ErrInvalidCommand, len(ids), c.Op(), fsmwire.MaxExpireSessions)
	}
	for _, s := range ids {
		if err := validateSession(s); err != nil {
			return err
		}
	}
	return nil
}

// Validate implements Command.
func (Tick) Validate() error { return nil }

// Validate implements Command.
func (Noop) Validate() error { return nil }

// Validate implements Command.
func (c EndDelay) Validate() error {
	if len(c.Delays) > fsmwire.MaxExpireSessions {
		return fmt.Errorf("%w: %d delays in one EndDelay (max %d)", fsmwire.ErrInvalidCommand, len(c.Delays), fsmwire.MaxExpireSessions)
	}
	for _, d := range c.Delays {
		if err := fsmwire.ValidateLockName(d.Lock); err != nil {
			return err
		}
	}
	return nil
}

// Validate implements Command.
func (c SetLimits) Validate() error { return c.Limits.Validate() }

// Validate implements Command.
func (c SetClusterVersion) Validate() error {
	if c.Version < 1 {
		return fmt.Errorf("%w: cluster version 0", fsmwire.ErrInvalidCommand)
	}
	return nil
}

// Validate implements Command.
func (c InitCluster) Validate() error { return fsmwire.ValidateClusterID(c.ID) }
