package chaos

import (
	"fmt"
	"sort"
)

// Restores in the log. A restore replaces the whole lock table at one
// index: the backup's holders, shared grants, waiters and lock-delays
// come back (under new sessions, with their tokens), and whatever the
// running cluster held ends without a release event. Every check that
// replays the log replays that too: at an install (a restored event), its
// state becomes the installed backup's.
//
// From cluster version 4 an install is an entry of the log (EvRestored).
// Before, hashicorp/raft's user restore installed the backup on the
// leader's state machine at an index of no entry; the only trace is the
// leader's subscriptions resyncing while it leads (a leader never installs
// another replica's snapshot): Check adds a restored event at that
// replica's applied index for every such resync that no restored event of
// the log explains (History.Resyncs).
//
// Each install is attributed to the restore call it belongs to: the last
// one invoked at or before its leader time (the operator class runs one
// restore at a time, and settles the cluster before the next). Its
// backup is what it installed.

// restoreInstall is one install of a restore.
type restoreInstall struct {
	pos    int         // its restored event's position in c.log
	call   *OperatorOp // the restore call it is attributed to (nil: none)
	backup *Backup     // what it installed (nil: unknown)
	marker bool        // seen as a leader's resync, not as an entry
	// held are the grants (tokens) the install ended: held just before it.
	held map[uint64]bool
}

// restoreMarkers returns a restored event for every resync of a leading
// replica that no restored event it applied explains (Resync.
// RestoredEvent) and that another replica followed, then or later: it
// installed the leader's snapshot. The indexes are those read when each
// resync was received, at or a few entries above the install's (which is
// taken as the lowest of them). A user restore no other replica followed
// was installed on its leader alone — a state no quorum committed —,
// which replicas-agree reports.
func (c *checker) restoreMarkers() []LogEvent {
	var out []LogEvent
	for _, r := range c.h.Resyncs {
		if !r.Leading || r.RestoredEvent {
			continue
		}
		index, followed := r.Index, false
		for _, o := range c.h.Resyncs {
			if o.Node != r.Node && !o.Leading && o.At >= r.At && o.Index+userRestoreGap >= r.Index && o.Index <= r.Index+userRestoreGap {
				index, followed = min(index, o.Index), true
			}
		}
		if !followed {
			c.fail(CheckReplicasAgree, "", "%s installed a restore at index %d alone (its state machine was replaced while it led, t=%d, and no other replica followed): a lock table no quorum committed", r.Node, r.Index, r.At)
			continue
		}
		out = append(out, LogEvent{Index: index, Seq: -1, Kind: EvRestored, Reason: "leader-resync " + r.Node, At: r.At, Observed: r.At})
	}
	return out
}

// userRestoreGap is how far apart the indexes read at the resyncs of one
// user restore may be (each replica may have applied an entry or a few
// more when its resync was received).
const userRestoreGap = 16

// seen is when a log event was first seen applied, or its leader time.
func (c *checker) seen(e LogEvent) int64 {
	if e.Observed != 0 {
		return e.Observed
	}
	return e.At
}

func abs64(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

// findInstalls lists the restored events of c.log and attributes each to
// its restore call.
func (c *checker) findInstalls() {
	var calls []*OperatorOp
	for i := range c.h.Operator {
		if op := &c.h.Operator[i]; op.Kind == ActRestore {
			calls = append(calls, op)
		}
	}
	sort.SliceStable(calls, func(i, j int) bool { return calls[i].Invoke < calls[j].Invoke })
	c.installAt = map[int]*restoreInstall{}
	for pos, e := range c.log {
		if e.Kind != EvRestored {
			continue
		}
		in := &restoreInstall{pos: pos, marker: e.Seq < 0}
		at := e.At
		if c.h.StampsUnreliable {
			at = c.seen(e)
		}
		for _, call := range calls {
			if call.Invoke <= at {
				in.call = call
			}
		}
		if in.call != nil && in.call.Backup >= 0 && in.call.Backup < len(c.h.Backups) {
			in.backup = &c.h.Backups[in.call.Backup]
		}
		c.installs = append(c.installs, in)
		c.installAt[pos] = in
	}
}

// describeInstall names an install for a report.
func (c *checker) describeInstall(in *restoreInstall) string {
	e := c.log[in.pos]
	s := fmt.Sprintf("index %d", e.Index)
	if in.marker {
		s += " (" + e.Reason + ")"
	}
	return s
}

// restoredHolds are the holds (exclusive, shared, waiting) an install
// brings back: its backup's; nil when unknown.
func (in *restoreInstall) restoredHolds() []EndHold {
	if in == nil || in.backup == nil {
		return nil
	}
	return in.backup.Holds
}

// primitive reports whether lock is a shared-grant name of the workload
// (History.Primitives).
func (c *checker) primitive(lock string) bool {
	_, ok := c.h.Primitives[lock]
	return ok
}
