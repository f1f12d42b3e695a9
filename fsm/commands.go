package fsm

import (
	"fmt"

	"github.com/raftlock/raftlock/internal/fsmwire"
)

// Command is one state machine command. The concrete types are
// [OpenSession], [CloseSession], [Acquire], [Release], [SetValue], [Revoke]
// (client commands) and [ExpireSessions], [Tick], [Noop], [EndDelay],
// [SetLimits], [SetClusterVersion], [InitCluster], [RaiseTokens],
// [RestoreChunk], [RestoreCommit], [RestoreAbort], [Renewed], [Takeover]
// (proposed by the leader); the set is closed: each is registered once in
// the command table (commandTable), and its methods are unexported.
type Command interface {
	// op returns the command's type byte (which may depend on its fields:
	// the lapsed forms).
	op() fsmwire.Op
	// validate checks the arguments against the hard limits. It does not
	// look at the state (nor at the replicated quotas).
	validate() error
	// version is the lowest entry version that can carry the command.
	version() byte
	// appendTo appends the command's type byte and body in entry version
	// v (at least version()).
	appendTo(dst []byte, v byte) ([]byte, error)
	// exec executes the validated command.
	exec(a *applier) Result
}

// commandSpec is one row of the command table: how a type byte is read.
type commandSpec struct {
	since  byte                                    // the first entry version that defines the type byte
	decode func(d *decoder, op fsmwire.Op) Command // reads the body (op: for types of several forms)
}

// commandTable registers every command type byte once. Adding a command
// takes its file (the type, its methods of Command and its body decoder),
// its type byte in fsmwire (Op, with its name) and one row here; see the
// package doc ("Adding a command").
var commandTable = [...]commandSpec{
	fsmwire.OpOpenSession:       {fsmwire.EntryV1, decodeOpenSession},
	fsmwire.OpCloseSession:      {fsmwire.EntryV1, decodeCloseSession},
	fsmwire.OpExpireSessions:    {fsmwire.EntryV1, decodeExpireSessions},
	fsmwire.OpAcquire:           {fsmwire.EntryV1, decodeAcquire},
	fsmwire.OpRelease:           {fsmwire.EntryV1, decodeRelease},
	fsmwire.OpTick:              {fsmwire.EntryV1, decodeTick},
	fsmwire.OpNoop:              {fsmwire.EntryV1, decodeNoop},
	fsmwire.OpEndDelay:          {fsmwire.EntryV2, decodeEndDelay},
	fsmwire.OpSetLimits:         {fsmwire.EntryV2, decodeSetLimits},
	fsmwire.OpSetClusterVersion: {fsmwire.EntryV2, decodeSetClusterVersion},
	fsmwire.OpInitCluster:       {fsmwire.EntryV2, decodeInitCluster},
	fsmwire.OpSetValue:          {fsmwire.EntryV3, decodeSetValue},
	fsmwire.OpRaiseTokens:       {fsmwire.EntryV3, decodeRaiseTokens},
	fsmwire.OpRevoke:            {fsmwire.EntryV3, decodeRevoke},
	fsmwire.OpRestoreChunk:      {fsmwire.EntryV4, decodeRestore},
	fsmwire.OpRestoreCommit:     {fsmwire.EntryV4, decodeRestore},
	fsmwire.OpRestoreAbort:      {fsmwire.EntryV4, decodeRestore},
	fsmwire.OpCloseLapsed:       {fsmwire.EntryV4, decodeCloseSession},
	fsmwire.OpReleaseLapsed:     {fsmwire.EntryV4, decodeRelease},
	fsmwire.OpSetLimitsFair:     {fsmwire.EntryV4, decodeFairForm},
	fsmwire.OpOpenSessionFair:   {fsmwire.EntryV4, decodeFairForm},
	fsmwire.OpRenewed:           {fsmwire.EntryV4, decodeRenewed},
	fsmwire.OpTakeover:          {fsmwire.EntryV4, decodeTakeover},
}

// command reads one command: its type byte, then its body as its row of
// the command table says. A type byte the entry's version does not define
// is unsupported (the state machine halts rather than skip it).
func (d *decoder) command() Command {
	op := fsmwire.Op(d.Byte())
	if d.Err != nil {
		return nil
	}
	if int(op) < len(commandTable) {
		if spec := commandTable[op]; spec.decode != nil && d.Version >= spec.since {
			return spec.decode(d, op)
		}
	}
	d.Off--
	d.Unsupported("command type %d in an entry of version %d", uint8(op), d.Version)
	return nil
}

// Validate checks c's arguments against the state machine's hard limits
// (not against the state, nor the replicated quotas): what the state
// machine refuses with StatusInvalid whatever the state.
func Validate(c Command) error { return c.validate() }

// OpOf returns c's type byte (its name is the Op's String; LeaderOnly
// says whether only the leader may propose it).
func OpOf(c Command) fsmwire.Op { return c.op() }

// errTooLong is the encoder's error for a field longer than its decoder
// accepts.
func errTooLong(what string) error {
	return fmt.Errorf("%w: %s too long", fsmwire.ErrInvalidEntry, what)
}
