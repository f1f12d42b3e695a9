package chaos

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/raftlock/raftlock/internal/testing/memnet"
)

// Bounds of one replay step: what the network may keep of the follower's
// conversations, and how many of them it sends again.
const (
	replayBudget = 256 << 10
	maxReplayed  = 4
)

// replayForward makes the network deliver a follower's conversation with
// the leader twice. The follower's pooled RPC connections to the leader are
// reset; the connections it dials next are recorded (memnet.Tap) from
// their first byte for a while; then, past the forward timeout — when
// every recorded request has been answered or given up and retried, and
// the locks its Acquires took may have been released and taken again —
// each recorded conversation is sent again, hand-shake included, from the
// follower's host to the leader's address on a connection of its own, and
// held open for a forward timeout while the leader answers. Every
// forwarded command in it (Acquire, Release, keepalives) reaches the
// leader a second time, late and on a connection the follower knows
// nothing of, so no cancel frame or connection loss of the original can
// stop its handler: a stale request must be refused (exactly-once).
//
// The in-process clusters speak plaintext (clustertest.PrefaceRPC is the
// first byte of an RPC connection); a TLS connection would not match the
// tap's preface and would not be replayed.
func (s *sim) replayForward() {
	l, f, ok := s.leaderAndFollower()
	if !ok {
		return
	}
	from, to := s.c.RaftHost(f), s.c.RaftHost(l)
	record := s.hold()
	late := s.forwardTimeout() + s.cfg.TTL/2 + time.Duration(s.rng.Int64N(int64(s.cfg.TTL)))
	done := s.fault("replay-forward", fmt.Sprintf("%s→%s: recorded for %v, sent again %v later", s.c.ID(f), s.c.ID(l), record, late))
	defer done()

	tap := s.tapForward(from, to)
	time.Sleep(record)
	tap.Stop()
	recs := tap.Recordings()
	time.Sleep(late)
	s.replayRecorded(fmt.Sprintf("replay-forward %s→%s", s.c.ID(f), s.c.ID(l)), tap, recs)
}

// tapForward resets the RPC connections from host from to host to and
// records the ones dialed next from their first byte (stop the tap when
// done).
func (s *sim) tapForward(from, to string) *memnet.Tap {
	tap := s.net.Tap(memnet.FlowFilter{From: from, To: to, Preface: prefaceRPC}, replayBudget)
	for _, fl := range s.net.Flows(memnet.FlowFilter{From: from, To: to, Preface: prefaceRPC}) {
		s.net.ResetFlow(fl.ID)
	}
	return tap
}

// replayRecorded sends each of the first maxReplayed recorded
// conversations again, each on a connection of its own held open for a
// forward timeout while the leader answers, and notes what was sent.
func (s *sim) replayRecorded(what string, tap *memnet.Tap, recs []memnet.Recording) {
	recs = recs[:min(len(recs), maxReplayed)]
	results := make([]string, len(recs))
	var wg sync.WaitGroup
	for i, r := range recs {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), s.forwardTimeout()+s.cfg.TTL/2)
			defer cancel()
			k, err := tap.Replay(ctx, r.ID)
			results[i] = fmt.Sprintf("conn %d: %d bytes", r.ID, k)
			if err != nil {
				results[i] += fmt.Sprintf(" (%v)", err)
			}
		})
	}
	wg.Wait()
	s.note("%s: %d conversations sent again: %s", what, len(recs), strings.Join(results, "; "))
}
