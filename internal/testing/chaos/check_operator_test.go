package chaos

import (
	"strings"
	"testing"
)

// Self-tests of the operator class's checks (checkOperator, findInstalls,
// checkUnknown) and of what the shared checks make
// of restores, revocations and lapses: each violation is flagged, and the
// legal shapes pass.

func requireClean(t *testing.T, r *Report) {
	t.Helper()
	if !r.OK() {
		t.Fatalf("flagged: %+v (porcupine %s)", r.Violations, r.Porcupine)
	}
}

// restoredHistory: A holds x with token 1 when backup 0 is taken, then
// releases it; B takes token 2 and holds it when the backup is restored
// (index 4): token 1 is held again by the backup's session, B's hold
// ends without a release event, and B's client learns a while later
// (its window closes at 180, within a TTL of the restore). The restored
// session expires (index 5) and C is granted token 3 after it.
func restoredHistory() *hb {
	b := newHB().
		op(Op{Client: 0, Kind: OpAcquire, Lock: "x", Invoke: 0, Return: 10, Result: Granted, Token: 1, Owner: "a", ValidTo: 50}).
		ev(LogEvent{Index: 1, Kind: EvGranted, Lock: "x", Owner: "a", Token: 1, At: 1, Observed: 5}).
		op(Op{Client: 0, Kind: OpRelease, Lock: "x", Token: 1, Owner: "a", Invoke: 50, Return: 55, Result: OK}).
		ev(LogEvent{Index: 2, Kind: EvReleased, Lock: "x", Owner: "a", Token: 1, Reason: "owner", At: 51, Observed: 52}).
		op(Op{Client: 1, Kind: OpAcquire, Lock: "x", Invoke: 60, Return: 70, Result: Granted, Token: 2, Owner: "b", ValidTo: 180, Lost: 180}).
		ev(LogEvent{Index: 3, Kind: EvGranted, Lock: "x", Owner: "b", Token: 2, At: 61, Observed: 65}).
		ev(LogEvent{Index: 4, Kind: EvRestored, Token: 2, At: 100, Observed: 101}).
		op(Op{Client: 1, Kind: OpRelease, Lock: "x", Token: 2, Owner: "b", Invoke: 190, Return: 195, Result: NotHolder}).
		ev(LogEvent{Index: 5, Kind: EvReleased, Lock: "x", Owner: "a", Session: 9, Token: 1, Reason: "session-expired", At: 400, Observed: 401}).
		op(Op{Client: 2, Kind: OpAcquire, Lock: "x", Invoke: 300, Return: 410, Result: Granted, Token: 3, Owner: "c", ValidTo: 500}).
		ev(LogEvent{Index: 5, Kind: EvGranted, Lock: "x", Owner: "c", Token: 3, At: 400, Observed: 401}).
		op(Op{Client: 2, Kind: OpRelease, Lock: "x", Token: 3, Owner: "c", Invoke: 500, Return: 505, Result: OK}).
		ev(LogEvent{Index: 6, Kind: EvReleased, Lock: "x", Owner: "c", Token: 3, Reason: "owner", At: 501, Observed: 502})
	b.h.TTL = 200 * ms
	b.h.Backups = []Backup{{Index: 1, LastToken: 1, Holds: []EndHold{{Lock: "x", Session: 1, Owner: "a", Token: 1}}}}
	b.h.Operator = []OperatorOp{
		{ID: 0, Kind: ActBackup, Node: "n1", Invoke: 20 * ms, Return: 21 * ms, Result: ActOK, Backup: 0},
		{ID: 1, Kind: ActRestore, Node: "n2", Invoke: 90 * ms, Return: 110 * ms, Result: ActOK, Backup: 0},
	}
	return b
}

// A restore in the log: the restored hold is held and released again,
// the hold it replaced ends without a release, and B's window overlaps
// nothing it may not: the shared checks and porcupine pass.
func TestCheckRestoreInTheLog(t *testing.T) {
	r := checked(t, restoredHistory())
	requireClean(t, r)
	if r.RestoresInstalled != 1 {
		t.Fatalf("%d installs", r.RestoresInstalled)
	}
}

// The restore installed twice for one call, installed for a call that
// was not proposed, or never installed for a call that succeeded.
func TestCheckRestoreInstalledOnce(t *testing.T) {
	twice := restoredHistory()
	twice.h.Log = append(twice.h.Log, LogEvent{Index: 4, Seq: 1, Kind: EvRestored, Token: 2, At: 105 * ms, Observed: 106 * ms})
	requireViolation(t, checked(t, twice), CheckOperatorOnce)

	notProposed := restoredHistory()
	notProposed.h.Operator[1].Result = ActNotProposed
	requireViolation(t, checked(t, notProposed), CheckOperatorOnce)

	var lost []LogEvent
	b := restoredHistory()
	for _, e := range b.h.Log {
		if e.Kind != EvRestored {
			lost = append(lost, e)
		}
	}
	b.h.Log = lost
	requireViolation(t, checked(t, b), CheckOperatorOnce)

	noCall := restoredHistory()
	noCall.h.Operator = noCall.h.Operator[:1]
	requireViolation(t, checked(t, noCall), CheckOperatorOnce)
}

// A restore whose grant counter is below a token granted before it: the
// next grant may take that token again.
func TestCheckRestoreSetsTheCounterBack(t *testing.T) {
	b := restoredHistory()
	for i := range b.h.Log {
		if b.h.Log[i].Kind == EvRestored {
			b.h.Log[i].Token = 1
		}
	}
	requireViolation(t, checked(t, b), CheckTokenUnique)
}

// Before restores were entries of the log, the leader's resync while it
// led marks an install (Check adds its restored event); one no other
// replica followed was installed on that leader alone.
func TestCheckRestoreSeenAsALeadersResync(t *testing.T) {
	strip := func() *hb {
		b := restoredHistory()
		var log []LogEvent
		for _, e := range b.h.Log {
			if e.Kind != EvRestored {
				log = append(log, e)
			}
		}
		b.h.Log = log
		return b
	}
	b := strip()
	b.h.Resyncs = []Resync{{Node: "n1", At: 100 * ms, Index: 4, Leading: true}, {Node: "n2", At: 101 * ms, Index: 4}}
	r := checked(t, b)
	requireClean(t, r)
	if r.RestoresInstalled != 1 {
		t.Fatalf("%d installs", r.RestoresInstalled)
	}
	b = strip()
	b.h.Resyncs = []Resync{{Node: "n1", At: 100 * ms, Index: 4, Leading: true}, {Node: "n1", At: 130 * ms, Index: 7, Leading: true}, {Node: "n2", At: 101 * ms, Index: 4}, {Node: "n2", At: 131 * ms, Index: 7}}
	requireViolation(t, checked(t, b), CheckOperatorOnce) // twice
	alone := strip()
	alone.h.Operator[1].Result = ActUnknown
	alone.h.Resyncs = []Resync{{Node: "n1", At: 100 * ms, Index: 4, Leading: true}}
	requireViolation(t, checked(t, alone), CheckReplicasAgree)
}

// The operator exception: B's window may outlast the restore that ended
// its hold by at most a TTL, and only a grant after the restore may
// overlap it.
func TestCheckOperatorExceptionIsBounded(t *testing.T) {
	b := restoredHistory()
	b.h.Ops[2].ValidTo, b.h.Ops[2].Lost = 450*ms, 450*ms // past the TTL after the restore, and into C's window
	requireViolation(t, checked(t, b), CheckValidity)

	// Without the restore the overlap is no exception.
	b = newHB().
		op(Op{Client: 1, Kind: OpAcquire, Lock: "x", Invoke: 0, Return: 10, Result: Granted, Token: 1, Owner: "b", ValidTo: 150}).
		ev(LogEvent{Index: 1, Kind: EvGranted, Lock: "x", Owner: "b", Token: 1, At: 1, Observed: 5}).
		ev(LogEvent{Index: 2, Kind: EvClosed, Session: 4, At: 100, Observed: 101}).
		ev(LogEvent{Index: 2, Kind: EvReleased, Lock: "x", Owner: "b", Session: 4, Token: 1, Reason: "session-closed", At: 100, Observed: 101}).
		op(Op{Client: 2, Kind: OpAcquire, Lock: "x", Invoke: 90, Return: 110, Result: Granted, Token: 2, Owner: "c", ValidTo: 200}).
		ev(LogEvent{Index: 2, Kind: EvGranted, Lock: "x", Owner: "c", Token: 2, At: 100, Observed: 101}).
		op(Op{Client: 2, Kind: OpRelease, Lock: "x", Token: 2, Owner: "c", Invoke: 200, Return: 205, Result: OK}).
		ev(LogEvent{Index: 3, Kind: EvReleased, Lock: "x", Owner: "c", Token: 2, Reason: "owner", At: 201, Observed: 202})
	b.h.TTL = 200 * ms
	r := checked(t, b)
	requireViolation(t, r, CheckValidity)
	requireViolation(t, r, CheckLeaseBeforeLog)
	// The operator ended session 4: the same history is the exception.
	b.h.Operator = []OperatorOp{{Kind: ActEndSession, Node: "n1", Session: 4, Invoke: 95 * ms, Return: 103 * ms, Result: ActOK, Backup: -1}}
	requireClean(t, checked(t, b))
}

// A revocation ends one grant: twice, never for a call that succeeded,
// from no call at all.
func TestCheckRevokeEndsOneGrant(t *testing.T) {
	build := func() *hb {
		b := newHB().
			op(Op{Client: 1, Kind: OpAcquire, Lock: "x", Invoke: 0, Return: 10, Result: Granted, Token: 1, Owner: "b", ValidTo: 150, Lost: 150}).
			ev(LogEvent{Index: 1, Kind: EvGranted, Lock: "x", Owner: "b", Token: 1, At: 1, Observed: 5}).
			ev(LogEvent{Index: 2, Kind: EvReleased, Lock: "x", Owner: "b", Token: 1, Reason: "revoked", At: 100, Observed: 101}).
			op(Op{Client: 1, Kind: OpRelease, Lock: "x", Token: 1, Owner: "b", Invoke: 160, Return: 165, Result: NotHolder})
		b.h.TTL = 200 * ms
		b.h.Operator = []OperatorOp{{Kind: ActRevoke, Node: "n1", Lock: "x", Token: 1, Invoke: 95 * ms, Return: 103 * ms, Result: ActOK, Backup: -1}}
		return b
	}
	requireClean(t, checked(t, build()))
	twice := build()
	twice.ev(LogEvent{Index: 3, Kind: EvReleased, Lock: "x", Owner: "b", Token: 1, Reason: "revoked", At: 120, Observed: 121})
	requireViolation(t, checked(t, twice), CheckOperatorOnce)
	noCall := build()
	noCall.h.Operator = nil
	requireViolation(t, checked(t, noCall), CheckOperatorOnce)
	notProposed := build()
	notProposed.h.Operator[0].Result = ActNotProposed
	requireViolation(t, checked(t, notProposed), CheckOperatorOnce)
}

// An operator call that returns more than a TTL after its deadline.
func TestCheckOperatorCallsAreBounded(t *testing.T) {
	b := clean()
	b.h.TTL = 200 * ms
	b.h.Operator = []OperatorOp{{Kind: ActSnapshot, Node: "n1", Invoke: 0, Deadline: 100 * ms, Return: 350 * ms, Result: ActUnknown, Backup: -1}}
	requireViolation(t, checked(t, b), CheckBoundedCall)
	b.h.Operator[0].Return = 250 * ms
	requireClean(t, checked(t, b))
}

// A replica that never reaches the leader's applied index after a heal.
func TestCheckWedgedReplica(t *testing.T) {
	b := clean()
	b.h.CatchUps = []CatchUp{{What: "restore isolated-leader", Start: 0, Deadline: 5000 * ms, Leader: "n2", Index: 110, Lagging: "n1 applied 19"}}
	requireViolation(t, checked(t, b), CheckWedged)
	b.h.CatchUps[0].Done = 30 * ms
	requireClean(t, checked(t, b))
}

// A lapse keeps the lock-delay: the close of a session whose lease lapsed
// on its client, and an Unlock sent after its lease was lost, must start
// it; a close the client asked for while healthy, and an operator's
// end-session, need not.
func TestCheckLapseKeepsTheLockDelay(t *testing.T) {
	build := func(reason string) *hb {
		b := newHB().
			op(Op{Client: 0, Kind: OpAcquire, Lock: "x", Session: 7, Invoke: 0, Return: 10, Result: Granted, Token: 1, Owner: "a", ValidTo: 100, Lost: 100}).
			ev(LogEvent{Index: 1, Kind: EvGranted, Lock: "x", Session: 7, Owner: "a", Token: 1, At: 1, Observed: 5}).
			op(Op{Client: 0, Kind: OpRelease, Lock: "x", Session: 7, Token: 1, Owner: "a", Invoke: 150, Return: 160, Result: OK}).
			ev(LogEvent{Index: 2, Kind: EvReleased, Lock: "x", Session: 7, Owner: "a", Token: 1, Reason: reason, At: 155, Observed: 156})
		b.h.LockDelay = 500 * ms
		b.h.DelaySessions = []uint64{7}
		return b
	}
	for _, reason := range []string{"session-closed", "owner"} {
		b := build(reason)
		if reason != "owner" {
			b.h.Ops = b.h.Ops[:1]
		}
		r := checked(t, b)
		requireViolation(t, r, CheckLockDelay)
		if !strings.Contains(r.Violations[0].Detail, "lapse") {
			t.Errorf("%s: %s", reason, r.Violations[0].Detail)
		}
	}
	voluntary := build("session-closed")
	voluntary.h.Ops = voluntary.h.Ops[:1]
	voluntary.h.Ops[0].Lost = 0
	voluntary.h.Closes = []SessionClose{{Session: 7, At: 150 * ms}}
	requireClean(t, checked(t, voluntary))
	ended := build("session-closed").ev(LogEvent{Index: 2, Kind: EvClosed, Session: 7, At: 155, Observed: 156})
	ended.h.Ops = ended.h.Ops[:1]
	ended.h.TTL = 200 * ms
	ended.h.Operator = []OperatorOp{{Kind: ActEndSession, Node: "n1", Session: 7, Invoke: 150 * ms, Return: 158 * ms, Result: ActOK, Backup: -1}}
	requireClean(t, checked(t, ended))
	released := build("owner")
	released.h.Ops[0].Lost = 0
	requireClean(t, checked(t, released))
}

// An acquisition no client knows must end once its replica resynced (or
// the cluster is whole again for the bound): a read grant whose answer
// was lost, still held 3 TTLs after its session's replica installed a
// snapshot covering it.
func TestCheckUnknownAcquisitionIsReleased(t *testing.T) {
	build := func() *hb {
		b := newHB().
			op(Op{Client: 900, Kind: OpTryReadAcquire, Lock: "rw", Node: "n2", Session: 5, Shared: true, Invoke: 0, Return: 500, Result: Fail, Err: "no quorum", ErrKind: ErrNoQuorum}).
			ev(LogEvent{Index: 1, Kind: EvGranted, Lock: "rw", Session: 5, Owner: "lost", Token: 1, Shared: true, At: 10, Observed: 12})
		b.h.TTL = 100 * ms
		b.h.End = 2000 * ms
		b.h.Expect.ExactlyOnce = true
		b.h.Primitives = map[string]int{"rw": 0}
		b.h.Nemesis = []FaultEvent{{Kind: "lost-answer", Start: 0, End: 1500 * ms}}
		b.h.Resyncs = []Resync{{Node: "n2", At: 700 * ms, Index: 3}}
		return b
	}
	requireViolation(t, checked(t, build()), CheckUnknownHeld)
	released := build().ev(LogEvent{Index: 4, Kind: EvReleased, Lock: "rw", Session: 5, Owner: "lost", Token: 1, Shared: true, Reason: "owner", At: 710, Observed: 711})
	requireClean(t, checked(t, released))
	// Never resynced: the bound runs once no fault is active — past the
	// end of this run, where the end state judges it.
	late := build()
	late.h.Resyncs = nil
	late.h.End = 1700 * ms
	requireClean(t, checked(t, late))
}

// A queued wait whose library is gone (its replica crashed while the
// Lock waited; the replica had installed a snapshot covering the wait
// while the call still knew it) ends only with its session's expiry; a
// stall of the followers' disks stops every commit, that expiry's too, so
// the bound runs from the stall's end (the disk class, seed 8009: the
// expiry committed as the stall ended). The same late expiry with nothing
// stalled is still a violation.
func TestCheckUnknownWaitOutlivesADiskStall(t *testing.T) {
	build := func() *hb {
		b := newHB().
			op(Op{Client: 3, Kind: OpAcquire, Lock: "x", Node: "n1", Session: 4, Invoke: 80, Return: 160, Result: Fail, Err: "session expired: the node is closed"}).
			ev(LogEvent{Index: 1, Kind: EvGranted, Lock: "x", Session: 9, Owner: "other", Token: 1, At: 50, Observed: 51}).
			ev(LogEvent{Index: 2, Kind: EvQueued, Lock: "x", Session: 4, Owner: "lost", At: 81, Observed: 82}).
			ev(LogEvent{Index: 4, Kind: EvReleased, Lock: "x", Session: 9, Owner: "other", Token: 1, Reason: "owner", At: 190, Observed: 191}).
			ev(LogEvent{Index: 4, Kind: EvGranted, Lock: "x", Session: 4, Owner: "lost", Token: 2, At: 190, Observed: 191}).
			ev(LogEvent{Index: 6, Kind: EvReleased, Lock: "x", Session: 4, Owner: "lost", Token: 2, Reason: "session-expired", At: 650, Observed: 651}).
			ev(LogEvent{Index: 6, Kind: EvExpired, Session: 4, At: 650, Observed: 651})
		b.h.TTL = 100 * ms
		b.h.End = 1500 * ms
		b.h.Expect.ExactlyOnce = true
		b.h.Resyncs = []Resync{{Node: "n1", At: 140 * ms, Index: 3}}
		b.h.Nemesis = []FaultEvent{
			{Kind: "disk-full", Target: "n1", Start: 20 * ms, End: 150 * ms},
			{Kind: "stall-follower-disks", Target: "[n1 n2]", Start: 200 * ms, End: 650 * ms},
		}
		return b
	}
	requireClean(t, checked(t, build()))
	leader := build()
	leader.h.Nemesis[1] = FaultEvent{Kind: "stall-leader-disk", Target: "[n3]", Start: 200 * ms, End: 650 * ms}
	requireClean(t, checked(t, leader))
	unstalled := build()
	unstalled.h.Nemesis = unstalled.h.Nemesis[:1]
	requireViolation(t, checked(t, unstalled), CheckUnknownHeld)
}

// Shared grants in the log across a restore, and the clients' windows
// with the operator exception: a reader revoked while a writer is granted
// may overlap it until its client learns, within a TTL.
func TestCheckPrimitivesAcrossOperatorActions(t *testing.T) {
	build := func() *hb {
		b := newHB().
			op(Op{Client: 0, Kind: OpReadAcquire, Lock: "rw", Shared: true, Invoke: 0, Return: 10, Result: Granted, Token: 1, Owner: "r", ValidTo: 150, Lost: 150}).
			ev(LogEvent{Index: 1, Kind: EvGranted, Lock: "rw", Owner: "r", Token: 1, Shared: true, At: 1, Observed: 5}).
			ev(LogEvent{Index: 2, Kind: EvReleased, Lock: "rw", Owner: "r", Token: 1, Shared: true, Reason: "revoked", At: 100, Observed: 101}).
			op(Op{Client: 1, Kind: OpAcquire, Lock: "rw", Invoke: 90, Return: 110, Result: Granted, Token: 2, Owner: "w", ValidTo: 300}).
			ev(LogEvent{Index: 2, Kind: EvGranted, Lock: "rw", Owner: "w", Token: 2, At: 100, Observed: 101}).
			op(Op{Client: 1, Kind: OpRelease, Lock: "rw", Token: 2, Owner: "w", Invoke: 300, Return: 305, Result: OK}).
			ev(LogEvent{Index: 3, Kind: EvReleased, Lock: "rw", Owner: "w", Token: 2, Reason: "owner", At: 301, Observed: 302})
		b.h.TTL = 200 * ms
		b.h.Primitives = map[string]int{"rw": 0}
		b.h.Operator = []OperatorOp{{Kind: ActRevoke, Node: "n1", Lock: "rw", Token: 1, Shared: true, Invoke: 95 * ms, Return: 103 * ms, Result: ActOK, Backup: -1}}
		return b
	}
	requireClean(t, checked(t, build()))
	noRevoke := build()
	noRevoke.h.Log[1].Reason = "session-expired"
	noRevoke.h.Operator = nil
	requireViolation(t, checked(t, noRevoke), CheckReaderDuringWriter)
	// A restore brings a reader back while the writer holds: the log has
	// a reader during a writer after the restore's entry.
	restored := build()
	restored.ev(LogEvent{Index: 3, Kind: EvRestored, At: 250, Observed: 251})
	restored.h.Log[len(restored.h.Log)-2], restored.h.Log[len(restored.h.Log)-1] = restored.h.Log[len(restored.h.Log)-1], restored.h.Log[len(restored.h.Log)-2]
	restored.h.Backups = []Backup{{Index: 1, Holds: []EndHold{{Lock: "rw", Owner: "r", Token: 1, Shared: true}, {Lock: "rw", Owner: "w2", Token: 1}}}}
	restored.h.Operator = append(restored.h.Operator, OperatorOp{ID: 1, Kind: ActRestore, Node: "n1", Invoke: 240 * ms, Return: 260 * ms, Result: ActOK, Backup: 0})
	requireViolation(t, checked(t, restored), CheckReaderDuringWriter)
}
