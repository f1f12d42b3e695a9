package node

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/lockinfo"
)

// A new leader reads the sessions a page at a time: it arms the deadline
// of every session of every page, and of one opened after the read.
func TestTakeoverArmsEveryPageOfSessions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newExpiryRig(t)
		var ids []lockinfo.SessionID
		for range 2_500 { // three pages
			ids = append(ids, r.mustApply(fsm.OpenSession{TTL: time.Second}).Session)
		}
		r.mustApply(fsm.CloseSession{Session: ids[1000]})
		r.lead()
		ids = append(ids, r.mustApply(fsm.OpenSession{TTL: time.Second}).Session)
		left, err := r.m.leasesLeft(ids)
		if err != nil {
			t.Fatal(err)
		}
		if _, closed := left[ids[1000]]; len(left) != len(ids)-1 || closed {
			t.Fatalf("%d sessions armed of %d (the closed one: %v)", len(left), len(ids)-1, closed)
		}
	})
}
