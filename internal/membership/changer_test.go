package membership

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// recorder is a Changer that records the calls made to it.
type recorder struct{ calls []string }

type doneFuture struct{}

func (doneFuture) Error() error  { return nil }
func (doneFuture) Index() uint64 { return 7 }

func (r *recorder) AddVoter(id raft.ServerID, addr raft.ServerAddress, prev uint64, _ time.Duration) raft.IndexFuture {
	r.calls = append(r.calls, fmt.Sprintf("AddVoter(%s,%s,%d)", id, addr, prev))
	return doneFuture{}
}

func (r *recorder) AddNonvoter(id raft.ServerID, addr raft.ServerAddress, prev uint64, _ time.Duration) raft.IndexFuture {
	r.calls = append(r.calls, fmt.Sprintf("AddNonvoter(%s,%s,%d)", id, addr, prev))
	return doneFuture{}
}

func (r *recorder) DemoteVoter(id raft.ServerID, prev uint64, _ time.Duration) raft.IndexFuture {
	r.calls = append(r.calls, fmt.Sprintf("DemoteVoter(%s,%d)", id, prev))
	return doneFuture{}
}

func (r *recorder) RemoveServer(id raft.ServerID, prev uint64, _ time.Duration) raft.IndexFuture {
	r.calls = append(r.calls, fmt.Sprintf("RemoveServer(%s,%d)", id, prev))
	return doneFuture{}
}

func TestExecute(t *testing.T) {
	for _, tc := range []struct {
		a    Action
		want string
	}{
		{Action{Kind: AddNonvoter, RaftID: "n4~2", Addr: "h4:7400"}, "AddNonvoter(n4~2,h4:7400,0)"},
		{Action{Kind: Promote, RaftID: "n4~2", Addr: "h4:7400"}, "AddVoter(n4~2,h4:7400,0)"},
		{Action{Kind: UpdateAddr, RaftID: "n2~1", Addr: "h9:7400", Voter: true}, "AddVoter(n2~1,h9:7400,0)"},
		{Action{Kind: UpdateAddr, RaftID: "n5~1", Addr: "h9:7400"}, "AddNonvoter(n5~1,h9:7400,0)"},
		{Action{Kind: Demote, RaftID: "n3~1"}, "DemoteVoter(n3~1,0)"},
		{Action{Kind: RemoveLeaving, RaftID: "n3~1"}, "RemoveServer(n3~1,0)"},
		{Action{Kind: Replace, RaftID: "n3~1"}, "RemoveServer(n3~1,0)"},
		{Action{Kind: Reap, RaftID: "n3~1"}, "RemoveServer(n3~1,0)"},
	} {
		var r recorder
		f, err := Execute(&r, tc.a, time.Second)
		if err != nil || f == nil {
			t.Fatalf("%s: %v", tc.a.Kind, err)
		}
		if len(r.calls) != 1 || r.calls[0] != tc.want {
			t.Errorf("%s: calls %v, want [%s]", tc.a.Kind, r.calls, tc.want)
		}
	}
	var r recorder
	if _, err := Execute(&r, Action{Kind: "grow", RaftID: "n1~1"}, time.Second); !errors.Is(err, ErrUnknownAction) || len(r.calls) != 0 {
		t.Fatalf("unknown action: %v, calls %v; want ErrUnknownAction and no call", err, r.calls)
	}
}
