package fsm

import (
	"encoding/binary"
	"fmt"

	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/lockinfo"
)

// SetValue replaces the value of the grant of Owner on Lock (the exclusive
// holder, a reader or a semaphore holder of Session). Result: StatusOK with
// the grant's Token, StatusNotHolder if Owner holds no grant of Lock for
// Session (a waiter has no grant yet), StatusNoSession, or StatusQuota
// when a longer value would pass Limits.MaxStateBytes or the node's share
// of it. Exactly-once with Seq, like every session command. Cluster
// version 3.
type SetValue struct {
	Session  lockinfo.SessionID
	Lock     string
	Owner    lockinfo.OwnerID
	Value    string // at most MaxValueLen bytes
	Seq      uint64 // request number; 0: none
	AckBelow uint64 // every request of the session below it is finished
}

// RaiseTokens raises the grant counter to at least the entry's leader time
// in microseconds (see "Tokens across a rebuilt cluster"); a counter
// already above it is unchanged. Proposed by the leader. Result: StatusOK
// with Token = the counter after the command. Cluster version 3.
type RaiseTokens struct{}

// op implements Command.
func (SetValue) op() fsmwire.Op { return fsmwire.OpSetValue }

// op implements Command.
func (RaiseTokens) op() fsmwire.Op { return fsmwire.OpRaiseTokens }

// validate implements Command.
func (c SetValue) validate() error {
	if err := validateAcquisitionOf(c.Session, c.Lock, c.Owner); err != nil {
		return err
	}
	if err := fsmwire.ValidateValue(c.Value); err != nil {
		return err
	}
	return validateRequest(c.Seq, c.AckBelow)
}

// validate implements Command.
func (RaiseTokens) validate() error { return nil }

// validateKind checks the primitive fields of an Acquire.
func (c Acquire) validateKind() error {
	if err := fsmwire.ValidateValue(c.Value); err != nil {
		return err
	}
	switch {
	case c.Limit == 0 && c.Permits == 0:
		return nil
	case c.Shared:
		return fmt.Errorf("%w: a shared acquisition of a semaphore", fsmwire.ErrInvalidCommand)
	}
	return fsmwire.ValidateSemaphore(c.Limit, c.Permits)
}

// primitive reports whether an Acquire uses a field of cluster version 3.
func (c Acquire) primitive() bool {
	return c.Shared || c.Limit != 0 || c.Permits != 0 || c.Value != ""
}

// version implements Command.
func (SetValue) version() byte { return fsmwire.EntryV3 }

// version implements Command.
func (RaiseTokens) version() byte { return fsmwire.EntryV3 }

// appendTo implements Command.
func (c SetValue) appendTo(dst []byte, _ byte) ([]byte, error) {
	dst = append(dst, byte(fsmwire.OpSetValue))
	if len(c.Lock) > fsmwire.MaxLockNameLen || len(c.Value) > fsmwire.MaxValueLen {
		return dst, errTooLong("lock name or value")
	}
	dst = binary.AppendUvarint(dst, uint64(c.Session))
	dst = fsmwire.AppendString(dst, c.Lock)
	dst = append(dst, c.Owner[:]...)
	dst = fsmwire.AppendString(dst, c.Value)
	return fsmwire.AppendRequest(dst, c.Seq, c.AckBelow), nil
}

// appendTo implements Command.
func (RaiseTokens) appendTo(dst []byte, _ byte) ([]byte, error) {
	return append(dst, byte(fsmwire.OpRaiseTokens)), nil
}

// exec implements Command.
func (c SetValue) exec(a *applier) Result { return a.setValue(c) }

// exec implements Command.
func (RaiseTokens) exec(a *applier) Result { return a.raiseTokens() }

func decodeSetValue(d *decoder, _ fsmwire.Op) Command {
	c := SetValue{Session: d.session(), Lock: d.String(fsmwire.MaxLockNameLen), Owner: d.owner(), Value: d.String(fsmwire.MaxValueLen)}
	c.Seq, c.AckBelow = d.Uvarint(), d.Uvarint()
	return c
}

func decodeRaiseTokens(*decoder, fsmwire.Op) Command { return RaiseTokens{} }
