package fsm

import (
	"encoding/binary"
	"fmt"

	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/lockinfo"
)

// Commands proposed by the leader itself (Op.LeaderOnly). A replica refuses
// them from clients; the state machine cannot tell who proposed a command,
// so the node enforces it.

// ExpireSessions ends sessions whose lease ran out; proposed by the leader.
// Like CloseSession, except that locks held by a session with a lock-delay
// enter that delay instead of passing to their next waiter. Unknown sessions
// are skipped. Result: StatusOK with Count = number of sessions expired.
type ExpireSessions struct {
	Sessions []lockinfo.SessionID
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
	Token lockinfo.Token
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

// op implements Command.
func (ExpireSessions) op() fsmwire.Op { return fsmwire.OpExpireSessions }

// op implements Command.
func (Tick) op() fsmwire.Op { return fsmwire.OpTick }

// op implements Command.
func (Noop) op() fsmwire.Op { return fsmwire.OpNoop }

// op implements Command.
func (EndDelay) op() fsmwire.Op { return fsmwire.OpEndDelay }

// op implements Command.
func (SetLimits) op() fsmwire.Op { return fsmwire.OpSetLimits }

// op implements Command.
func (SetClusterVersion) op() fsmwire.Op { return fsmwire.OpSetClusterVersion }

// op implements Command.
func (InitCluster) op() fsmwire.Op { return fsmwire.OpInitCluster }

// validate implements Command.
func (c ExpireSessions) validate() error { return validateSessionList(c, c.Sessions) }

// validateSessionList checks the session list of c (ExpireSessions,
// Renewed): at most MaxExpireSessions valid ids.
func validateSessionList(c Command, ids []lockinfo.SessionID) error {
	if len(ids) > fsmwire.MaxExpireSessions {
		return fmt.Errorf("%w: %d sessions in one %s (max %d)", fsmwire.ErrInvalidCommand, len(ids), c.op(), fsmwire.MaxExpireSessions)
	}
	for _, s := range ids {
		if err := validateSession(s); err != nil {
			return err
		}
	}
	return nil
}

// validate implements Command.
func (Tick) validate() error { return nil }

// validate implements Command.
func (Noop) validate() error { return nil }

// validate implements Command.
func (c EndDelay) validate() error {
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

// validate implements Command.
func (c SetLimits) validate() error { return c.Limits.Validate() }

// validate implements Command.
func (c SetClusterVersion) validate() error {
	if c.Version < 1 {
		return fmt.Errorf("%w: cluster version 0", fsmwire.ErrInvalidCommand)
	}
	return nil
}

// validate implements Command.
func (c InitCluster) validate() error { return fsmwire.ValidateClusterID(c.ID) }

// version implements Command.
func (ExpireSessions) version() byte { return fsmwire.EntryV1 }

// version implements Command.
func (Tick) version() byte { return fsmwire.EntryV1 }

// version implements Command.
func (Noop) version() byte { return fsmwire.EntryV1 }

// version implements Command.
func (EndDelay) version() byte { return fsmwire.EntryV2 }

// version implements Command.
func (c SetLimits) version() byte {
	if fairForm(c) {
		return fsmwire.EntryV4
	}
	return fsmwire.EntryV2
}

// version implements Command.
func (SetClusterVersion) version() byte { return fsmwire.EntryV2 }

// version implements Command.
func (InitCluster) version() byte { return fsmwire.EntryV2 }

// appendTo implements Command.
func (c ExpireSessions) appendTo(dst []byte, _ byte) ([]byte, error) {
	return appendSessions(append(dst, byte(fsmwire.OpExpireSessions)), c.Sessions)
}

// appendTo implements Command.
func (Tick) appendTo(dst []byte, _ byte) ([]byte, error) {
	return append(dst, byte(fsmwire.OpTick)), nil
}

// appendTo implements Command.
func (Noop) appendTo(dst []byte, _ byte) ([]byte, error) {
	return append(dst, byte(fsmwire.OpNoop)), nil
}

// appendTo implements Command.
func (c EndDelay) appendTo(dst []byte, _ byte) ([]byte, error) {
	dst = append(dst, byte(fsmwire.OpEndDelay))
	if len(c.Delays) > fsmwire.MaxExpireSessions {
		return dst, errTooLong("delay list")
	}
	dst = binary.AppendUvarint(dst, uint64(len(c.Delays)))
	for _, d := range c.Delays {
		if len(d.Lock) > fsmwire.MaxLockNameLen {
			return dst, errTooLong("lock name")
		}
		dst = fsmwire.AppendString(dst, d.Lock)
		dst = binary.AppendUvarint(dst, uint64(d.Token))
	}
	return dst, nil
}

// appendTo implements Command.
func (c SetLimits) appendTo(dst []byte, _ byte) ([]byte, error) {
	if fairForm(c) {
		return appendFairForm(dst, c)
	}
	dst = append(dst, byte(fsmwire.OpSetLimits))
	for _, x := range c.Limits.fields() {
		if x < 0 || x > maxQuota {
			return dst, fmt.Errorf("%w: limit %d out of range", fsmwire.ErrInvalidEntry, x)
		}
		dst = binary.AppendUvarint(dst, uint64(x))
	}
	return dst, nil
}

// appendTo implements Command.
func (c SetClusterVersion) appendTo(dst []byte, _ byte) ([]byte, error) {
	return binary.AppendUvarint(append(dst, byte(fsmwire.OpSetClusterVersion)), c.Version), nil
}

// appendTo implements Command.
func (c InitCluster) appendTo(dst []byte, _ byte) ([]byte, error) {
	dst = append(dst, byte(fsmwire.OpInitCluster))
	if len(c.ID) > fsmwire.MaxClusterIDLen {
		return dst, errTooLong("cluster id")
	}
	return fsmwire.AppendString(dst, c.ID), nil
}

// exec implements Command.
func (c ExpireSessions) exec(a *applier) Result { return a.expireSessions(c.Sessions) }

// exec implements Command.
func (Tick) exec(a *applier) Result { return a.tick() }

// exec implements Command.
func (Noop) exec(*applier) Result { return Result{Status: fsmwire.StatusOK} }

// exec implements Command.
func (c EndDelay) exec(a *applier) Result { return a.endDelay(c.Delays) }

// exec implements Command.
func (c SetLimits) exec(a *applier) Result {
	a.st.limits = c.Limits
	return Result{Status: fsmwire.StatusOK}
}

// exec implements Command.
func (c SetClusterVersion) exec(a *applier) Result { return a.setClusterVersion(c.Version) }

// exec implements Command.
func (c InitCluster) exec(a *applier) Result { return a.initCluster(c.ID) }

func decodeExpireSessions(d *decoder, _ fsmwire.Op) Command {
	return ExpireSessions{Sessions: d.sessions()}
}

func decodeTick(*decoder, fsmwire.Op) Command { return Tick{} }

func decodeNoop(*decoder, fsmwire.Op) Command { return Noop{} }

func decodeEndDelay(d *decoder, _ fsmwire.Op) Command {
	n := d.Count(fsmwire.MaxExpireSessions, 2)
	var c EndDelay
	if n > 0 {
		c.Delays = make([]DelayRef, n)
		for i := range c.Delays {
			c.Delays[i] = DelayRef{Lock: d.String(fsmwire.MaxLockNameLen), Token: lockinfo.Token(d.Uvarint())}
		}
	}
	return c
}

func decodeSetLimits(d *decoder, _ fsmwire.Op) Command {
	var l Limits
	d.limits(&l)
	return SetLimits{Limits: l}
}

func decodeSetClusterVersion(d *decoder, _ fsmwire.Op) Command {
	return SetClusterVersion{Version: d.Uvarint()}
}

func decodeInitCluster(d *decoder, _ fsmwire.Op) Command {
	return InitCluster{ID: d.String(fsmwire.MaxClusterIDLen)}
}
