package node

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/lockinfo"
	"github.com/raftlock/raftlock/internal/replica"
)

func TestWireRoundTrip(t *testing.T) {
	cmds := []fsm.Command{
		fsm.OpenSession{TTL: 5e9, Description: "x"},
		fsm.Acquire{Session: 3, Lock: "a", Owner: lockinfo.OwnerID{1}, Wait: true},
		fsm.Release{Lock: "a", Owner: lockinfo.OwnerID{1}},
	}
	req, err := encodeApplyRequest(cmds)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeApplyRequest(req)
	if err != nil || !reflect.DeepEqual(got, cmds) {
		t.Fatalf("apply request: %v %+v", err, got)
	}
	outs := []outcome{
		{res: &fsm.Result{Status: fsmwire.StatusGranted, Session: 3, Token: 9}, index: 42},
		{err: errNotLeader},
		{err: replica.ErrSessionExpired},
	}
	back, err := decodeApplyReply(encodeApplyReply(outs), len(outs))
	if err != nil {
		t.Fatal(err)
	}
	if back[0].result() != outs[0].result() || back[0].index != 42 || back[0].err != nil {
		t.Fatalf("outcome 0: %+v", back[0])
	}
	if !errors.Is(back[1].err, errNotLeader) || !errors.Is(back[2].err, replica.ErrSessionExpired) {
		t.Fatalf("errors: %v / %v", back[1].err, back[2].err)
	}
	if _, err := decodeApplyReply(encodeApplyReply(outs), 2); err == nil {
		t.Fatal("reply with the wrong count accepted")
	}
	if s, err := decodeKeepAliveRequest(encodeKeepAliveRequest(77)); err != nil || s != 77 {
		t.Fatalf("keepalive request: %v %d", err, s)
	}
	if v, err := decodeKeepAliveReply(encodeKeepAliveReply(ErrNoQuorum)); err != nil || !errors.Is(v, ErrNoQuorum) {
		t.Fatalf("keepalive reply: %v %v", err, v)
	}
	if term, err := decodeConfirmTermRequest(encodeConfirmTermRequest(1 << 40)); err != nil || term != 1<<40 {
		t.Fatalf("confirm-term request: %v %d", err, term)
	}
	for _, leader := range []bool{false, true} {
		if term, l, err := decodeConfirmTermReply(encodeConfirmTermReply(7, leader)); err != nil || term != 7 || l != leader {
			t.Fatalf("confirm-term reply: %v %d %v", err, term, l)
		}
	}
	if _, _, err := decodeConfirmTermReply(append(encodeConfirmTermReply(7, false)[:3], 2)); err == nil {
		t.Fatal("confirm-term reply with leader flag 2 accepted")
	}
	if _, err := decodeConfirmTermRequest(append(encodeConfirmTermRequest(7), 0)); err == nil {
		t.Fatal("confirm-term request with trailing bytes accepted")
	}
	if i, v, err := decodeReadIndexReply(encodeReadIndexReply(12, nil)); err != nil || v != nil || i != 12 {
		t.Fatalf("read-index reply: %v %v %d", err, v, i)
	}
	pi := peerInfo{NodeID: "n1", RaftID: "r1", Incarnation: "inc", ClusterID: "c", MaxVersion: 2, ClusterVersion: 2,
		Halted: "why", State: "follower", Term: 7, LastIndex: 9, CommitIndex: 8, AppliedIndex: 8, LastContact: 1500}
	if back, err := decodePeerInfoReply(encodePeerInfoReply(pi)); err != nil || back != pi {
		t.Fatalf("peer info: %v %+v", err, back)
	}
	if _, err := decodePeerInfoReply(encodePeerInfoReply(peerInfo{})); err == nil {
		t.Fatal("peer info without a version accepted")
	}
	if v, err := decodeApplyReply(encodeApplyReply([]outcome{{err: notProposed(context.Canceled)}}), 1); err != nil || !errors.Is(v[0].err, ErrNotProposed) {
		t.Fatalf("not proposed across the wire: %v %+v", err, v)
	}
	grants := []fsm.Event{
		{Kind: fsmwire.EventGranted, FromQueue: true, Index: 9, At: -5, Session: 3, Lock: "a/b", Owner: lockinfo.OwnerID{7}, Token: 41},
		{Kind: fsmwire.EventGranted, FromQueue: true, Index: 10, At: 1e18, Session: 4, Lock: "c", Owner: lockinfo.OwnerID{8, 1}, Token: 42},
	}
	if back, err := decodeGrantNotice(encodeGrantNotice(grants)); err != nil || !reflect.DeepEqual(back, grants) {
		t.Fatalf("grant notice: %v %+v", err, back)
	}
	for _, bad := range []fsm.Event{
		{Index: 0, Session: 3, Lock: "a", Owner: lockinfo.OwnerID{7}, Token: 1},
		{Index: 1, Session: 0, Lock: "a", Owner: lockinfo.OwnerID{7}, Token: 1},
		{Index: 1, Session: 3, Lock: "", Owner: lockinfo.OwnerID{7}, Token: 1},
		{Index: 1, Session: 3, Lock: "a", Token: 1},
		{Index: 1, Session: 3, Lock: "a", Owner: lockinfo.OwnerID{7}, Token: 0},
	} {
		if _, err := decodeGrantNotice(encodeGrantNotice([]fsm.Event{bad})); err == nil {
			t.Fatalf("implausible grant accepted: %+v", bad)
		}
	}
	if _, err := decodeGrantNotice(encodeGrantNotice(grants)[:20]); err == nil {
		t.Fatal("truncated grant notice accepted")
	}
}

// FuzzWire: no decoder panics or accepts trailing garbage; what decodes
// re-encodes to the same thing.
func FuzzWire(f *testing.F) {
	req, _ := encodeApplyRequest([]fsm.Command{fsm.Acquire{Session: 1, Lock: "a", Owner: lockinfo.OwnerID{1}}})
	f.Add(req)
	f.Add(encodeApplyReply([]outcome{{res: &fsm.Result{Status: fsmwire.StatusOK}, index: 1}, {err: ErrNoQuorum}}))
	f.Add(encodeKeepAliveRequest(5))
	f.Add(encodeKeepAliveReply(replica.ErrSessionExpired))
	f.Add(encodeReadIndexReply(3, nil))
	f.Add([]byte{wireVersion, 99})
	f.Add(encodeGrantNotice([]fsm.Event{{Index: 9, At: 5, Session: 3, Lock: "a", Owner: lockinfo.OwnerID{7}, Token: 41}}))
	f.Add(encodePeerInfoReply(peerInfo{NodeID: "n1", RaftID: "n1", MaxVersion: 2, ClusterVersion: 1, State: "leader", Term: 3, LastContact: 5}))
	f.Add(encodePeerInfoRequest())
	f.Add(encodeSnapshotAsk(36))
	f.Add(encodeKeepAliveBatchRequest([]lockinfo.SessionID{1, 300}))
	f.Add(encodeKeepAliveBatchReply([]error{nil, replica.ErrSessionExpired}))
	f.Add(encodeConfirmTermRequest(3))
	f.Add(encodeConfirmTermReply(4, true))
	v2, _ := encodeApplyRequest([]fsm.Command{fsm.Acquire{Session: 1, Lock: "a", Owner: lockinfo.OwnerID{1}, Seq: 3, AckBelow: 2}})
	f.Add(v2)
	for _, c := range []fsm.Command{
		fsm.RestoreChunk{ID: [16]byte{9}, Offset: 3, Total: 10, Data: []byte("RLKS\x04")},
		fsm.RestoreCommit{ID: [16]byte{9}, Size: 10},
		fsm.RestoreAbort{ID: [16]byte{9}},
	} {
		step, _ := encodeRestoreStep(c)
		f.Add(step)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if cmd, err := decodeRestoreStep(b); err == nil {
			again, err := encodeRestoreStep(cmd)
			if err != nil {
				t.Fatalf("restore step re-encode: %v", err)
			}
			if back, err := decodeRestoreStep(again); err != nil || !reflect.DeepEqual(back, cmd) || fsm.Validate(cmd) != nil {
				t.Fatalf("restore step round trip: %v", err)
			}
		}
		if cmds, err := decodeApplyRequest(b); err == nil {
			again, err := encodeApplyRequest(cmds)
			if err != nil {
				t.Fatalf("re-encode: %v", err)
			}
			if back, err := decodeApplyRequest(again); err != nil || !reflect.DeepEqual(back, cmds) {
				t.Fatalf("round trip: %v", err)
			}
		}
		for want := 0; want < 3; want++ {
			if outs, err := decodeApplyReply(b, want); err == nil && len(outs) != want {
				t.Fatalf("%d outcomes for %d", len(outs), want)
			}
		}
		if s, err := decodeKeepAliveRequest(b); err == nil {
			if back, err := decodeKeepAliveRequest(encodeKeepAliveRequest(s)); err != nil || back != s {
				t.Fatal("keepalive request round trip")
			}
		}
		if ids, err := decodeKeepAliveBatchRequest(b); err == nil {
			back, err := decodeKeepAliveBatchRequest(encodeKeepAliveBatchRequest(ids))
			if err != nil || !reflect.DeepEqual(back, ids) || len(ids) == 0 || len(ids) > maxKeepaliveBatch {
				t.Fatalf("keepalive batch round trip: %v (%d sessions)", err, len(ids))
			}
		}
		for want := 1; want < 3; want++ {
			if vs, err := decodeKeepAliveBatchReply(b, want); err == nil && len(vs) != want {
				t.Fatalf("%d verdicts for %d", len(vs), want)
			}
		}
		if grants, err := decodeGrantNotice(b); err == nil {
			back, err := decodeGrantNotice(encodeGrantNotice(grants))
			if err != nil || !reflect.DeepEqual(back, grants) {
				t.Fatalf("grant notice round trip: %v", err)
			}
		}
		if p, err := decodePeerInfoReply(b); err == nil {
			if back, err := decodePeerInfoReply(encodePeerInfoReply(p)); err != nil || back != p {
				t.Fatalf("peer info round trip: %v %+v %+v", err, p, back)
			}
		}
		if term, err := decodeConfirmTermRequest(b); err == nil {
			if back, err := decodeConfirmTermRequest(encodeConfirmTermRequest(term)); err != nil || back != term {
				t.Fatal("confirm-term request round trip")
			}
		}
		if term, leader, err := decodeConfirmTermReply(b); err == nil {
			if bt, bl, err := decodeConfirmTermReply(encodeConfirmTermReply(term, leader)); err != nil || bt != term || bl != leader {
				t.Fatal("confirm-term reply round trip")
			}
		}
		if i, err := decodeSnapshotAsk(b); err == nil {
			if back, err := decodeSnapshotAsk(encodeSnapshotAsk(i)); err != nil || back != i {
				t.Fatal("snapshot ask round trip")
			}
		}
		decodeKeepAliveReply(b)
		decodeReadIndexReply(b)
		requestKind(b)
	})
}
