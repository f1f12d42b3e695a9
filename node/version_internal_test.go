package node

import (
	"testing"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/lockinfo"
)

// A follower forwards in the entry version the cluster version allows: at
// version 1 a leader of the previous release reads only version 1, without
// request numbers.
func TestForwardRequestFollowsTheClusterVersion(t *testing.T) {
	cmds := []fsm.Command{
		fsm.Acquire{Session: 1, Lock: "l", Owner: lockinfo.OwnerID{1}, Seq: 4, AckBelow: 3},
		fsm.Release{Session: 1, Lock: "l", Owner: lockinfo.OwnerID{1}, Seq: 5, AckBelow: 3},
		fsm.CloseSession{Session: 1, Seq: 6, AckBelow: 3},
	}
	for _, tc := range []struct {
		version uint64
		entry   byte
	}{{1, 1}, {2, 2}} {
		req, err := forwardRequest(cmds, tc.version)
		if err != nil {
			t.Fatal(err)
		}
		if req[2] != tc.entry {
			t.Fatalf("cluster version %d: entry version %d, want %d", tc.version, req[2], tc.entry)
		}
		got, err := decodeApplyRequest(req)
		if err != nil {
			t.Fatal(err)
		}
		for i, c := range got {
			if want := fsm.Downgrade(cmds[i], tc.version); c != want {
				t.Fatalf("cluster version %d: command %d is %+v, want %+v", tc.version, i, c, want)
			}
		}
	}
}
