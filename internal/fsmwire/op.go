package fsmwire

import "fmt"

// Op is the type byte of a command on the wire. Values are part of the log
// format and must never be renumbered.
type Op uint8

// Command type bytes. Ops 1-7 exist since entry version 1; 8-11 need entry
// version 2 (cluster version 2); 12-13 and OpRevoke (40) need entry version
// 3 (cluster version 3); 41-43 (the restore commands), 44-45 (the lapsed
// forms of CloseSession and Release), 46-47 (the forms of SetLimits and
// OpenSession of the fair shares; their command is still SetLimits and
// OpenSession) and 48-49 (Renewed, Takeover) need entry version 4 (cluster
// version 4). Ops from 40 up belong to the operations commands, apart from
// the primitives' (12 and up).
const (
	OpOpenSession       Op = 1
	OpCloseSession      Op = 2
	OpExpireSessions    Op = 3
	OpAcquire           Op = 4
	OpRelease           Op = 5
	OpTick              Op = 6
	OpNoop              Op = 7
	OpEndDelay          Op = 8
	OpSetLimits         Op = 9
	OpSetClusterVersion Op = 10
	OpInitCluster       Op = 11
	OpSetValue          Op = 12
	OpRaiseTokens       Op = 13
	OpRevoke            Op = 40
	OpRestoreChunk      Op = 41
	OpRestoreCommit     Op = 42
	OpRestoreAbort      Op = 43
	OpCloseLapsed       Op = 44
	OpReleaseLapsed     Op = 45
	OpSetLimitsFair     Op = 46
	OpOpenSessionFair   Op = 47
	OpRenewed           Op = 48
	OpTakeover          Op = 49
)

var opNames = [...]string{
	OpOpenSession: "OpenSession", OpCloseSession: "CloseSession", OpExpireSessions: "ExpireSessions",
	OpAcquire: "Acquire", OpRelease: "Release", OpTick: "Tick", OpNoop: "Noop", OpEndDelay: "EndDelay",
	OpSetLimits: "SetLimits", OpSetClusterVersion: "SetClusterVersion", OpInitCluster: "InitCluster",
	OpSetValue: "SetValue", OpRaiseTokens: "RaiseTokens", OpRevoke: "Revoke",
	OpCloseLapsed: "CloseSession(lapsed)", OpReleaseLapsed: "Release(lapsed)",
	OpRestoreChunk: "RestoreChunk", OpRestoreCommit: "RestoreCommit", OpRestoreAbort: "RestoreAbort",
	OpRenewed: "Renewed", OpTakeover: "Takeover",
}

func (o Op) String() string {
	if int(o) < len(opNames) && opNames[o] != "" {
		return opNames[o]
	}
	return fmt.Sprintf("Op(%d)", uint8(o))
}

// LeaderOnly reports whether commands of this type are proposed by the
// leader itself (ExpireSessions, Tick, Noop, EndDelay, SetLimits,
// SetClusterVersion, InitCluster, RaiseTokens, the restore commands,
// Renewed, Takeover) and must be refused from clients.
func (o Op) LeaderOnly() bool {
	switch o {
	case OpOpenSession, OpCloseSession, OpAcquire, OpRelease, OpSetValue, OpRevoke, OpCloseLapsed, OpReleaseLapsed:
		return false
	}
	return true
}

// Entry versions. The first byte of every encoded entry is its version. A
// replica that meets a version it does not know (or a command type its
// version does not define) halts instead of skipping the entry: skipping is
// only deterministic if every replica runs the same code.
const (
	EntryV1         byte = 1 // ops 1-7, no request numbers
	EntryV2         byte = 2 // adds request numbers and ops 8-11
	EntryV3         byte = 3 // adds the primitives (Acquire flags 2-8, ops 12-13) and Revoke (op 40)
	EntryV4         byte = 4 // adds the commands of cluster version 4: the restore commands (ops 41-43), the lapsed forms (44-45), the fair shares' (46-47), Renewed and Takeover (48-49)
	MaxEntryVersion      = EntryV4
)
