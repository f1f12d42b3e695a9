package chaos

import (
	"fmt"
	"time"

	"github.com/raftlock/raftlock/internal/testing/clustertest"
	"github.com/raftlock/raftlock/internal/testing/memnet"
)

// The flow class (issue 14 #1): faults on single connections instead of
// whole hosts. One pooled RPC connection from a follower to the leader
// stalls past AttemptTimeout while the other carries the retry: the
// original request (and, later still, its cancel frame) arrives after the
// retry was answered — a delayed duplicate, delivered out of order. Or the
// network delivers a follower's whole conversation with the leader twice,
// the copy late and on a connection of its own (replayForward). Or the
// replies of one connection are late, or one direction of one Raft or RPC
// connection is black-holed.
//
// A delayed duplicate Acquire must never resurrect an acquisition its
// client has released: exactly-once in the log (an acquisition granted
// again, or after it ended), ghost-holder at the end (every holder and
// waiter belongs to an acquisition a live client knows).
func init() {
	register(&faultClass{name: "flow", nemesis: flowNemesis})
	ciDuration["flow"] = 30 * time.Second
}

// The in-process clusters' connection prefaces (clustertest.PrefaceRaft,
// PrefaceRPC).
var (
	prefaceRaft = clustertest.PrefaceRaft
	prefaceRPC  = clustertest.PrefaceRPC
)

func flowNemesis(s *sim) {
	for s.sleepUntilEnd(s.gap()) {
		switch k := s.rng.IntN(100); {
		case k < 35:
			s.stallForward()
		case k < 55:
			s.replayForward()
		case k < 65:
			s.flowFault(prefaceRPC, memnet.Backward, false)
		case k < 77:
			s.flowFault(prefaceRaft, memnet.Forward, s.rng.IntN(2) == 0)
		case k < 87:
			s.flowFault(prefaceRPC, memnet.Forward, true)
		default:
			s.mixedStep(s.rng.IntN(64))
		}
	}
}

// forwardTimeout is the cluster's AttemptTimeout (internal/cluster: 20
// heartbeat timeouts).
func (s *sim) forwardTimeout() time.Duration { return s.c.Config(0).AttemptTimeout }

// stallForward delays the requests of one RPC connection from a follower
// to the leader past the forward timeout, long enough for the retry to be
// granted and released first.
func (s *sim) stallForward() {
	l, f, ok := s.leaderAndFollower()
	if !ok {
		return
	}
	flows := s.net.Flows(memnet.FlowFilter{From: s.c.RaftHost(f), To: s.c.RaftHost(l), Preface: prefaceRPC})
	if len(flows) == 0 {
		return
	}
	fl := flows[s.rng.IntN(len(flows))]
	d := s.forwardTimeout() + s.cfg.TTL/2 + time.Duration(s.rng.Int64N(int64(2*s.cfg.TTL)))
	done := s.fault("stall-forward", fmt.Sprintf("%s→%s conn %d by %v", s.c.ID(f), s.c.ID(l), fl.ID, d))
	s.net.DelayFlow(fl.ID, memnet.Forward, d)
	time.Sleep(s.hold() + s.cfg.TTL)
	s.net.ClearFlows()
	time.Sleep(d) // what was delayed arrives
	done()
}

// flowFault delays (or, with cut, black-holes) direction dir of one
// connection of the given protocol between two running nodes.
func (s *sim) flowFault(preface []byte, dir memnet.Direction, cut bool) {
	flows := s.net.Flows(memnet.FlowFilter{Preface: preface})
	if len(flows) == 0 {
		return
	}
	fl := flows[s.rng.IntN(len(flows))]
	d := time.Duration(s.rng.Int64N(int64(2 * s.forwardTimeout())))
	kind := "delay-flow"
	if cut {
		kind = "cut-flow"
	}
	dirName := "requests"
	if dir == memnet.Backward {
		dirName = "replies"
	}
	done := s.fault(kind, fmt.Sprintf("%s→%s conn %d %s (%x) %v", fl.From, fl.To, fl.ID, dirName, preface, d))
	if cut {
		s.net.CutFlow(fl.ID, dir)
	} else {
		s.net.DelayFlow(fl.ID, dir, d)
	}
	time.Sleep(s.hold())
	s.net.ClearFlows()
	done()
}
