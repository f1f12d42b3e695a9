package fsm

import "github.com/raftlock/raftlock/internal/fsmwire"

// Cluster versions. The cluster version is part of the replicated state
// (SetClusterVersion raises it; it starts at 1, the version of every log
// written before it existed). It selects the semantics of every command
// applied after it, and so which encodings the leader may write: a replica
// of the previous release reads entries of version 1 only.
//
//	1  the previous release: lock-delays end on the leader's wall clock
//	   (Tick), FSM time only goes up, no request numbers, no quotas set.
//	2  exactly-once requests (Seq/AckBelow), lock-delays ended by the
//	   leader's EndDelay (timed on its monotonic clock), entry time is
//	   informational only, replicated quotas (SetLimits), the cluster id
//	   (InitCluster), snapshots of version 2.
//	3  the primitives (see the package doc): shared (read) grants, counting
//	   semaphores and values on Acquire (entry version 3), SetValue,
//	   RaiseTokens, StatusConflict, snapshots of version 3; Revoke.
//	4  snapshots of version 4: version 3 followed by optional sections
//	   (snapshotSections), the place of every later state the version-3
//	   records cannot carry; entry version 4 (its commands below);
//	   the lapsed forms of CloseSession and Release, with expiry
//	   semantics (lapse.go, ops 44-45); Revoke of a shared grant or a
//	   semaphore's permits (revoke.go); the fair shares (fairshare.go):
//	   the limits MaxLocks, MaxStateBytes, NodeShares and
//	   MaxSessionWaitersPerLock (SetLimits, op 46), OpenSession with the
//	   node it came from and the reserve (op 47), snapshot section 3
//	   (fairshare_snapshot.go);
//	   restore as a replicated command (versionRestore): RestoreChunk,
//	   RestoreCommit, RestoreAbort (ops 41-43) and the snapshot section
//	   "restores" (tag 1);
//	   Renewed and Takeover (ops 48-49), per-session renewals and takeover
//	   markers, in the renewals snapshot section (tag 2) (renewed.go), and
//	   node's ConfirmTerm message for keepalive confirmations (node's
//	   confirmTerm).
//
// A command of a version above the one in force is refused by the node
// (NeedsVersion) and, should one reach the log, by the state machine too
// (StatusInvalid, nothing changes) — so that no state a lower snapshot
// version cannot carry is ever reached.
const (
	// MaxClusterVersion is the highest cluster version this binary can
	// apply. A SetClusterVersion beyond it halts the state machine.
	MaxClusterVersion uint64 = 4
	// versionExactlyOnce is the cluster version from which request numbers,
	// EndDelay and the other version 2 commands may be written.
	versionExactlyOnce uint64 = 2
	// versionPrimitives is the cluster version from which the commands of
	// version 3 may be written and applied.
	versionPrimitives uint64 = 3
	// versionSections is the cluster version from which snapshots are
	// written in version 4 (with sections).
	versionSections uint64 = 4
	// versionEntries4 is the cluster version from which entries of
	// version 4 (the commands of cluster version 4) may be written.
	versionEntries4 uint64 = 4
	// versionFairShares is the cluster version from which the forms of
	// SetLimits and OpenSession of the fair shares may be written and
	// applied (fairshare_codec.go).
	versionFairShares uint64 = 4
)

// Downgrade returns c as a cluster of the given version carries it: below
// version 4 the lapsed forms of CloseSession and Release become the plain
// ones (lapse.go: a lapse noticed by the client releases without the
// lock-delay, as before, until every server supports version 4), and the
// limits of version 4 of a SetLimits and the node and reserve of an
// OpenSession are dropped (fairshare_codec.go); below version 2 the request numbers (Seq, AckBelow) and Release.Session are
// dropped too — exactly-once is off while the cluster version is 1 (a
// rolling upgrade) and commands are applied as the previous release
// applied them. Commands that have no such form (EndDelay, SetLimits,
// SetClusterVersion, InitCluster, and every command of version 3) are
// returned unchanged: they need their own version (NeedsVersion).
func Downgrade(c Command, clusterVersion uint64) Command {
	if clusterVersion < versionLapse {
		switch l := c.(type) {
		case CloseSession:
			l.Lapsed = false
			c = l
		case Release:
			l.Lapsed = false
			c = l
		}
	}
	if clusterVersion < versionFairShares {
		c = withoutFairShares(c)
	}
	if clusterVersion >= versionExactlyOnce {
		return c
	}
	switch c := c.(type) {
	case Acquire:
		c.Seq, c.AckBelow = 0, 0
		return c
	case Release:
		c.Session, c.Seq, c.AckBelow = 0, 0, 0
		return c
	case CloseSession:
		c.Seq, c.AckBelow = 0, 0
		return c
	}
	return c
}

// NeedsVersion returns the lowest cluster version at which c may be
// proposed (1 for the commands of the previous release without request
// numbers): the cluster version of the entry version c needs.
func NeedsVersion(c Command) uint64 {
	if _, ok := c.(SetClusterVersion); ok || c == nil {
		return 1 // it is what raises the version
	}
	switch c.version() {
	case fsmwire.EntryV1:
		return 1
	case fsmwire.EntryV2:
		return versionExactlyOnce
	case fsmwire.EntryV3:
		return versionPrimitives
	}
	return versionEntries4
}
