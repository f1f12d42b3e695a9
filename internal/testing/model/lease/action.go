package lease

import "fmt"

// Action is one step of the protocol. C names a client (or session), Arg
// a keepalive slot, a choice or a count.
type Action struct {
	Kind uint8
	C    uint8
	Arg  uint8
	Arg2 uint8
}

// Action kinds.
const (
	aTick          uint8 = iota + 1 // one tick of real time passes
	aElect                          // a new leader is elected (Arg 1: its clock is fast; Arg2: wall offset + Wall)
	aDepose                         // the leader loses its leadership; Arg of its uncommitted entries survive in the next leader's log
	aCommit                         // the oldest uncommitted entry commits and every replica applies it
	aInstall                        // the new leader installs its deadlines and lock-delay timers (the end of expiryManager.takeOver)
	aProposeExpire                  // the leader proposes ExpireSessions for session C, past its deadline
	aProposeEnd                     // the leader proposes EndDelay for the lock's delay, whose time is up
	aSendKA                         // client C sends a keepalive
	aArrive                         // keepalive Arg of client C reaches the leader
	aArriveOld                      // keepalive Arg of client C reaches the deposed leader, which acknowledges it
	aConfirm                        // the leader's confirmation of keepalive Arg of client C completes
	aReply                          // the reply to keepalive Arg reaches client C
	aDrop                           // keepalive Arg of client C, or its reply, is lost
	aOpen                           // client C sends OpenSession
	aAcquire                        // client C asks for the lock (Lock, Acquire)
	aUnlock                         // client C unlocks while its window is open
	aWithdraw                       // client C gives up its acquisition (a wait, or one whose outcome it does not know)
	aClose                          // client C closes its session while valid
	aLoseClose                      // client C, lost, sends CloseSession (Session.lose)
	aUnlockLost                     // client C, lost, unlocks its lost lease (Lease.Unlock → releaseAfterEnd)
	aAsk                            // the HTTP client of keeper C asks about its lease (the window moves on)
	aKeeperRelease                  // the admin API releases keeper C's lease, not asked about in time
	aDeliver                        // client C's command reaches the leader
	aDup                            // a duplicate of client C's last request reaches the leader
	aRevoke                         // an operator revokes the grant of client C
	aEndSession                     // an operator ends client C's session
	aBackup                         // an operator takes a backup
	aRestore                        // an operator restores the backup
	aOrphanExpire                   // the session of a restored backup that holds the lock expires
	aRebuild                        // the cluster is rebuilt from empty data dirs (a new cluster, a new leader)

	// Bounds.Edges and Bounds.DeposedRefusals.
	aLapse      // client C's window ends, within the tick in which it reached 0
	aArriveEdge // keepalive Arg of client C reaches the leader within the tick of the session's deadline, before it
	aRefuseOld  // keepalive Arg of client C reaches a deposed leader, which refuses it
)

var actionNames = map[uint8]string{
	aTick: "tick", aElect: "elect", aDepose: "depose", aCommit: "commit", aInstall: "install",
	aProposeExpire: "propose-expire", aProposeEnd: "propose-end-delay", aSendKA: "send-keepalive",
	aArrive: "keepalive-arrives", aArriveOld: "keepalive-at-deposed-leader", aConfirm: "confirm",
	aReply: "reply", aDrop: "drop", aOpen: "open", aAcquire: "acquire", aUnlock: "unlock",
	aWithdraw: "withdraw", aClose: "close", aLoseClose: "lose-close", aUnlockLost: "unlock-lost",
	aAsk: "http-ask", aKeeperRelease: "keeper-release", aDeliver: "deliver", aDup: "duplicate",
	aRevoke: "revoke", aEndSession: "end-session", aBackup: "backup", aRestore: "restore",
	aOrphanExpire: "orphan-expires", aRebuild: "rebuild",
	aLapse: "lapse", aArriveEdge: "keepalive-arrives-at-deadline", aRefuseOld: "keepalive-refused-by-deposed-leader",
}

// String names the action for a schedule.
func (a Action) String() string {
	n := actionNames[a.Kind]
	switch a.Kind {
	case aTick, aCommit, aInstall, aProposeEnd, aBackup, aRestore, aOrphanExpire, aRebuild:
		return n
	case aElect:
		clock := "slow"
		if a.Arg == 1 {
			clock = "fast"
		}
		return fmt.Sprintf("%s (clock %s, wall %+d)", n, clock, int(a.Arg2)-wallBias)
	case aDepose:
		return fmt.Sprintf("%s (%d uncommitted entries survive)", n, a.Arg)
	case aSendKA, aArrive, aArriveOld, aConfirm, aReply, aDrop, aArriveEdge, aRefuseOld:
		return fmt.Sprintf("%s c%d#%d", n, a.C, a.Arg)
	}
	return fmt.Sprintf("%s c%d", n, a.C)
}

// wallBias encodes a wall offset in Action.Arg2.
const wallBias = 100
