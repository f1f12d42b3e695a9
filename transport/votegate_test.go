package transport

import (
	"errors"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// The vote gate is asked once per vote request (RequestVote, RequestPreVote)
// and for nothing else; a refusal stops the stream exactly at that
// request's type byte, and is not a protocol violation.
func TestRaftGuardVoteGate(t *testing.T) {
	stream := raftRequests(t) // AppendEntries ×2, RequestVote, RequestPreVote, TimeoutNow, InstallSnapshot, AppendEntries
	var asked atomic.Int32
	g := raftGuard{vote: func() bool { asked.Add(1); return true }}
	if err := feedChunks(&g, stream, rand.New(rand.NewPCG(7, 8))); err != nil {
		t.Fatalf("raft traffic refused with the gate open: %v", err)
	}
	if n := asked.Load(); n != 2 {
		t.Fatalf("gate asked %d times for one RequestVote and one RequestPreVote, want 2", n)
	}

	// Closed: byte by byte, the first refused byte is the RequestVote's type
	// byte; every byte before it (two AppendEntries) passed.
	g = raftGuard{vote: func() bool { return false }}
	at := -1
	for i := range stream {
		if err := g.feed(stream[i : i+1]); err != nil {
			if !errors.Is(err, errVoteRefused) || errors.Is(err, errProtocol) {
				t.Fatalf("refusal at byte %d: %v, want errVoteRefused (not a protocol error)", i, err)
			}
			at = i
			break
		}
	}
	if at < 0 || stream[at] != raftRequestVote {
		t.Fatalf("gate closed: refused at byte %d, want the RequestVote type byte", at)
	}
	var plain raftGuard // zero value: no gate, everything passes
	if err := plain.feed(stream); err != nil {
		t.Fatalf("zero guard refused raft traffic: %v", err)
	}
}

// End to end over TCP: while the gate is closed a candidate's RequestVote
// and RequestPreVote fail and never reach raft's consumer on the voter,
// while AppendEntries on the same pair of transports still does; once the
// gate opens, votes pass.
func TestRaftVoteGateRefusesVotes(t *testing.T) {
	var open atomic.Bool
	cfg := testConfig(nil)
	cfg.RaftVoteGate = open.Load
	voter := startTransport(t, cfg, echo)
	cand := startTransport(t, testConfig(nil), echo)
	consumer := voter.RaftTransport().Consumer()
	served := make(chan any, 16)
	done := make(chan struct{})
	defer close(done)
	go func() { // a stand-in raft on the voter: answers whatever arrives
		for {
			select {
			case rpc := <-consumer:
				served <- rpc.Command
				switch rpc.Command.(type) {
				case *raft.RequestVoteRequest:
					rpc.Respond(&raft.RequestVoteResponse{Granted: true}, nil)
				case *raft.RequestPreVoteRequest:
					rpc.Respond(&raft.RequestPreVoteResponse{Granted: true}, nil)
				default:
					rpc.Respond(&raft.AppendEntriesResponse{Success: true}, nil)
				}
			case <-done:
				return
			}
		}
	}()
	hdr := raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("cand"), Addr: []byte(cand.Addr())}
	nt := cand.RaftTransport()
	vote := func() (error, error) {
		var vr raft.RequestVoteResponse
		verr := nt.RequestVote("voter", raftAddr(voter), &raft.RequestVoteRequest{RPCHeader: hdr, Term: 5}, &vr)
		var pr raft.RequestPreVoteResponse
		perr := nt.RequestPreVote("voter", raftAddr(voter), &raft.RequestPreVoteRequest{RPCHeader: hdr, Term: 5}, &pr)
		return verr, perr
	}
	if verr, perr := vote(); verr == nil || perr == nil {
		t.Fatalf("gate closed: RequestVote err %v, RequestPreVote err %v; want both to fail", verr, perr)
	}
	var ar raft.AppendEntriesResponse
	if err := nt.AppendEntries("voter", raftAddr(voter), &raft.AppendEntriesRequest{RPCHeader: hdr, Term: 5, Entries: []*raft.Log{{Index: 1, Term: 5, Data: []byte("x")}}}, &ar); err != nil || !ar.Success {
		t.Fatalf("AppendEntries with the gate closed: %v %+v", err, ar)
	}
	select {
	case c := <-served:
		if _, ok := c.(*raft.AppendEntriesRequest); !ok {
			t.Fatalf("raft received %T while the gate was closed", c)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("AppendEntries never reached raft")
	}
	select {
	case c := <-served:
		t.Fatalf("raft received %T while the gate was closed", c)
	default:
	}
	open.Store(true)
	if verr, perr := vote(); verr != nil || perr != nil {
		t.Fatalf("gate open: RequestVote err %v, RequestPreVote err %v", verr, perr)
	}
	for range 2 {
		select {
		case c := <-served:
			switch c.(type) {
			case *raft.RequestVoteRequest, *raft.RequestPreVoteRequest:
			default:
				t.Fatalf("raft received %T, want the vote requests", c)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("vote request never reached raft with the gate open")
		}
	}
	if n := counterValue(t, voter.metrics.protocol); n != 0 {
		t.Fatalf("refused votes counted as %v protocol violations", n)
	}
}
