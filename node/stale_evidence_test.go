package node_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/nodeopts"
	"github.com/raftlock/raftlock/internal/replica"
	"github.com/raftlock/raftlock/internal/testing/clustertest"
	"github.com/raftlock/raftlock/internal/testing/memnet"
	"github.com/raftlock/raftlock/node"
)

// Issue 45 item 7: a keepalive must be confirmed only by evidence from
// after it arrived. hashicorp/raft v1.7.3's VerifyLeader counts, as a
// follower's vote, the first successful reply processed after the verify
// registered — also a reply to a request the follower processed before the
// keepalive arrived and before it voted for a new leader — and the leader
// lease (LeaderLeaseTimeout) is kept alive by such replies arriving late.
//
// The schedule (nodeopts.TestTiming: heartbeat, election and lease timeouts 50 ms;
// TTL 100 ms, the client's margin TTL/20):
//
//   - A's replies to the leader L take 49 ms; B's are prompt.
//   - t1, just after A processed a heartbeat: L's requests to A are cut, B's
//     replies to L take 85 ms from now on. L's lease lives on A's last reply
//     (t1+49) and B's delayed ones (t1+90..96).
//   - t1+11: L hands leadership to B (an operator's transfer: B campaigns at
//     once, A votes for it although it knows L). B leads and takes over at
//     about t1+12, giving the client's session TTL + 50 ms from then. B's
//     vote request reaches L only at about t1+96.
//   - t1+30, t1+82: the client's keepalives reach L. VerifyLeader
//     is confirmed by A's last reply and then by B's reply to a heartbeat B
//     processed before t1+11 (arriving t1+90..96), so the client counts its
//     session valid to t1+82+95 = t1+177 — but B expires it at about
//     t1+162 and grants the lock to the waiter.
//
// From cluster version 4 rounds are ConfirmTerm: L's request reaches B
// after B's election, B answers its new term, and the keepalive fails.
// Below version 4 the rounds stay VerifyLeader (a server of the previous
// release may vote): the keepalive is acknowledged, as before.
func TestKeepaliveNotConfirmedByStaleEvidence(t *testing.T) {
	for _, tc := range []struct {
		name    string
		version uint64
	}{
		{"version 4: ConfirmTerm", fsm.MaxClusterVersion},
		{"version 3: VerifyLeader, as the previous release", 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The schedule needs L's transfer request to reach B at once: on
			// a Raft connection L already has, not a new one whose
			// handshake waits for B's delayed answer. It does unless every
			// connection L pooled to B waits for a delayed reply then: such
			// a run is void and runs again.
			var stale staleEvidence
			for attempt := 1; !stale.valid; attempt++ {
				if attempt > 5 {
					t.Fatal("the schedule did not happen in 5 runs")
				}
				synctest.Test(t, func(t *testing.T) {
					net := memnet.New()
					c := clustertest.Start(t, clustertest.Options{Net: net, Configure: func(i int, cfg *node.Config) {
						nodeopts.Hooks(cfg).MaxClusterVersion = func() uint64 { return tc.version }
					}})
					c.WaitLeader(10 * time.Second)
					c.WaitReady(10 * time.Second)
					waitClusterVersion(t, c, tc.version)
					stale = staleEvidenceSchedule(t, c, net, c.WaitLeader(time.Second))
				})
			}
			switch {
			case tc.version >= 4 && stale.acked > 0:
				t.Fatalf("%d keepalives arriving after the new leader took over were acknowledged on stale evidence; the waiter was granted %v before the client's window ended",
					stale.acked, stale.window.Sub(stale.granted))
			case tc.version >= 4 && stale.granted.Before(stale.window):
				t.Fatalf("the waiter was granted %v before the client's window ended", stale.window.Sub(stale.granted))
			case tc.version < 4 && stale.acked == 0:
				t.Fatal("below cluster version 4 the late keepalives were refused: rounds are not VerifyLeader")
			}
		})
	}
}

// staleEvidence is what the schedule saw.
type staleEvidence struct {
	valid   bool      // B took over within 25 ms of t1, as the schedule needs
	acked   int       // keepalives that arrived after the new leader took over, acknowledged
	window  time.Time // the end of the client's window (its acknowledged keepalives)
	granted time.Time // when the waiter got the lock
}

// staleEvidenceSchedule runs the schedule of TestKeepaliveNotConfirmedByStaleEvidence
// on c (3 nodes on net, led by l).
func staleEvidenceSchedule(t *testing.T, c *clustertest.Cluster, net *memnet.Network, l int) staleEvidence {
	t.Helper()
	ctx := context.Background()
	const ttl = 100 * time.Millisecond
	margin := ttl / 20
	L := c.Nodes[l]
	a, b := (l+1)%3, (l+2)%3
	A, B := c.Nodes[a], c.Nodes[b]

	client := openSession(t, ctx, L, ttl)
	var out staleEvidence
	out.window = time.Now().Add(ttl - margin)
	mustApply(t, L, fsm.Acquire{Session: client, Lock: "x", Owner: newOwner()}, fsmwire.StatusGranted)
	grant, stopWatch := queueWaiter(t, B, L, openSession(t, ctx, L, time.Minute), "x")
	defer stopWatch()
	keepalive := func() bool {
		sent := time.Now()
		kctx, cancel := context.WithTimeout(ctx, ttl/2)
		defer cancel()
		if err := replica.Of(L).KeepAlive(kctx, client); err != nil {
			return false
		}
		out.window = sent.Add(ttl - margin)
		return true
	}

	defer func() { // also when the test fails: the cluster must close
		net.Heal()
		net.ClearDelays()
	}()
	net.SetDelay(c.RaftHost(a), c.RaftHost(l), 49*time.Millisecond)
	// While B's replies take 20 ms, L's heartbeats and replication to B
	// overlap: L pools a second Raft connection to B, idle once the delay
	// is gone (for the transfer request below).
	net.SetDelay(c.RaftHost(b), c.RaftHost(l), 20*time.Millisecond)
	for i := range 12 { // the client renews through L; the delays settle
		if i == 8 {
			net.SetDelay(c.RaftHost(b), c.RaftHost(l), 0)
		}
		time.Sleep(ttl / 4)
		if !keepalive() {
			// A round that overlaps one still in flight while the delays are
			// set up can miss its ttl/2 (the confirmation waits for B's
			// delayed reply to the next round): the schedule needs renewals
			// that work, so such a run is void and runs again.
			t.Logf("void run: a keepalive before the schedule failed: %s", c.Describe())
			return out
		}
	}
	// t1: just after A processed one of L's requests.
	last := node.RaftLastContact(A)
	for node.RaftLastContact(A).Equal(last) {
		time.Sleep(time.Millisecond / 4)
	}
	t1 := time.Now()

	net.Block(c.RaftHost(l), c.RaftHost(a))
	net.SetDelay(c.RaftHost(b), c.RaftHost(l), 85*time.Millisecond)
	time.Sleep(t1.Add(11 * time.Millisecond).Sub(time.Now()))
	transferred := make(chan error, 1)
	go func() {
		tctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		_, err := node.TransferOnce(tctx, L, c.ID(b)) // it fails (its reply is late): B leads anyway
		transferred <- err
	}()
	defer func() { t.Logf("the transfer returned %v", <-transferred) }()
	for !node.IsLeading(B) {
		if time.Since(t1) > 25*time.Millisecond {
			t.Logf("void run: B did not take over by t1+25ms: %s", c.Describe())
			return out
		}
		time.Sleep(time.Millisecond / 4)
	}
	out.valid = true
	takeover := time.Since(t1)
	// The client renews through L as before: at t1+30 (a round confirmed by
	// A's last reply) and at t1+82 (a round that starts before B's delayed
	// replies arrive; one still in flight would make it wait for the next).
	for _, at := range []time.Duration{30, 82} {
		time.Sleep(t1.Add(at * time.Millisecond).Sub(time.Now()))
		if keepalive() {
			out.acked++
		}
	}

	out.granted = <-grant
	if out.granted.IsZero() {
		t.Fatalf("the waiter was never granted: %s", c.Describe())
	}
	t.Logf("B took over %v after t1; %d of 2 later keepalives to L acknowledged; the client's window ends %v after t1, the waiter was granted %v after t1",
		takeover, out.acked, out.window.Sub(t1), out.granted.Sub(t1))
	return out
}
