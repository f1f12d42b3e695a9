package node_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashicorp/raft"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/lockinfo"
	"github.com/raftlock/raftlock/internal/nodeopts"
	"github.com/raftlock/raftlock/internal/replica"
	"github.com/raftlock/raftlock/internal/testing/clustertest"
	"github.com/raftlock/raftlock/internal/testing/memnet"
	"github.com/raftlock/raftlock/node"
)

// rpcPreface selects the node-to-node RPC connections (forwards, admin
// calls, keepalives) on a memnet network: their dialer's first byte.
var rpcPreface = []byte{0xA2}

// takeBackup opens a session on n that holds lock, takes a backup and
// releases the lock again: the backup holds lock, the running cluster
// does not.
func takeBackup(t *testing.T, n *node.Node, lock string) []byte {
	t.Helper()
	ctx := context.Background()
	s := openSession(t, ctx, n, time.Minute)
	o := newOwner()
	mustApply(t, n, fsm.Acquire{Session: s, Lock: lock, Owner: o}, fsmwire.StatusGranted)
	var b bytes.Buffer
	if _, err := n.Operator().Backup(ctx, &b); err != nil {
		t.Fatal(err)
	}
	mustApply(t, n, fsm.Release{Lock: lock, Owner: o}, fsmwire.StatusOK)
	return b.Bytes()
}

// sameState waits until every node has applied at least the leader's
// applied index (as read at the start) and all show the same state.
func sameState(t *testing.T, c *clustertest.Cluster, bound time.Duration) {
	t.Helper()
	li := c.WaitLeader(bound)
	target := replica.Of(c.Nodes[li]).AppliedIndex()
	c.Eventually(bound, func() (bool, string) {
		for _, n := range c.Nodes {
			if got := replica.Of(n).AppliedIndex(); got < target {
				return false, fmt.Sprintf("%s applied %d, the leader %d", n.ID(), got, target)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		var d0 [32]byte
		for i, n := range c.Nodes {
			if err := n.Sync(ctx); err != nil {
				return false, n.ID() + ": " + err.Error()
			}
			idx, d := replica.ServerOf(n).Digest()
			if i == 0 {
				d0 = d
			} else if d != d0 {
				return false, fmt.Sprintf("%s (applied %d) holds another state than %s", n.ID(), idx, c.Nodes[0].ID())
			}
		}
		return true, ""
	})
}

// Issue 45 item 1: a restore that reaches a leader cut off from both
// followers (still leading: its leader lease has not run out) cannot
// commit. It changes nothing anywhere — the cut-off leader keeps serving
// the lock table the cluster committed — and leaves no replica wedged:
// after the heal the operator restores through the new leader and every
// replica reaches the leader's applied index with the same state.
func TestRestoreOnACutOffLeaderChangesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, li := readyCluster(t, clustertest.Options{})
		ctx := context.Background()
		l := c.Nodes[li]
		backup := takeBackup(t, l, "from-backup")
		s := openSession(t, ctx, l, time.Minute)
		live := mustApply(t, l, fsm.Acquire{Session: s, Lock: "live", Owner: newOwner()}, fsmwire.StatusGranted)
		sameState(t, c, 5*time.Second)
		_, before := replica.ServerOf(l).Digest()

		c.Isolate(li)
		rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		_, err := l.Operator().Restore(rctx, bytes.NewReader(backup))
		cancel()
		if !errors.Is(err, node.ErrNoQuorum) {
			t.Fatalf("restore on a leader cut off from its quorum: %v, want ErrNoQuorum", err)
		}
		if _, held := l.Holder("from-backup"); held {
			t.Error("the cut-off leader serves the backup's lock table, which no quorum committed")
		}
		if h, held := l.Holder("live"); !held || h.Token != live.Token {
			t.Errorf("the cut-off leader lost the committed lock table: holder %+v (held %v)", h, held)
		}
		if _, d := replica.ServerOf(l).Digest(); d != before {
			t.Error("the failed restore changed the cut-off leader's state")
		}

		c.Heal()
		nl := c.WaitLeader(10 * time.Second)
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if _, err := c.Nodes[nl].Operator().Restore(sctx, bytes.NewReader(backup)); err != nil {
			t.Fatalf("restore through the new leader %s: %v", c.ID(nl), err)
		}
		sameState(t, c, 10*time.Second)
		for _, n := range c.Nodes {
			if _, held := n.Holder("from-backup"); !held {
				t.Fatalf("%s: the backup's lock is not held after the restore", n.ID())
			}
			if _, held := n.Holder("live"); held {
				t.Fatalf("%s: a lock of the replaced table is still held", n.ID())
			}
		}
		// The cluster keeps committing through every replica.
		for _, n := range c.Nodes {
			openSession(t, sctx, n, time.Minute)
		}
	})
}

// Issue 45 item 2: a restore forwarded by a follower whose reply is lost
// to a connection reset after the leader installed it is retried by the
// follower — and the retry does not install it again: a session and a
// lock granted between the two survive, and the call returns the first
// install's summary.
func TestForwardedRestoreWhoseReplyIsLostInstallsOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := memnet.New()
		c, li := readyCluster(t, clustertest.Options{Net: net})
		ctx := context.Background()
		l := c.Nodes[li]
		fi := c.Follower(li)
		f := c.Nodes[fi]
		backup := takeBackup(t, l, "from-backup")
		if err := f.Sync(ctx); err != nil { // the follower has RPC connections to the leader
			t.Fatal(err)
		}
		rpc := memnet.FlowFilter{From: c.RaftHost(fi), To: c.RaftHost(li), Preface: rpcPreface}
		if len(net.Flows(rpc)) == 0 {
			t.Fatal("no RPC connection from the follower to the leader")
		}
		// The leader's replies to the follower take a while: long enough
		// to reset the connection once the leader has installed the
		// restore, before the reply arrives.
		for _, fl := range net.Flows(rpc) {
			net.DelayFlow(fl.ID, memnet.Backward, 200*time.Millisecond)
		}
		type restored struct {
			sum fsm.RestoreSummary
			err error
		}
		done := make(chan restored, 1)
		go func() {
			rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			sum, err := f.Operator().Restore(rctx, bytes.NewReader(backup))
			done <- restored{sum, err}
		}()
		var first lockinfo.Holder
		for deadline := time.Now().Add(10 * time.Second); ; {
			if h, held := l.Holder("from-backup"); held {
				first = h
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the leader never installed the restore")
			}
			time.Sleep(time.Millisecond)
		}
		// Installed on the leader; its reply is still on the way. The
		// connection is reset (the reply is lost) and the follower's retry
		// held back until a session and a lock are granted.
		net.CutFlows(rpc, memnet.Forward)
		for _, fl := range net.Flows(rpc) {
			net.ResetFlow(fl.ID)
		}
		between := openSession(t, ctx, l, time.Minute)
		g := mustApply(t, l, fsm.Acquire{Session: between, Lock: "between", Owner: newOwner()}, fsmwire.StatusGranted)
		net.ClearFlows()

		var r restored
		select {
		case r = <-done:
		case <-time.After(40 * time.Second):
			t.Fatal("the forwarded restore never returned")
		}
		if r.err != nil {
			t.Fatalf("restore: %v", r.err)
		}
		if want := first.Session; r.sum.SessionOffset == 0 || r.sum.Held != 1 {
			t.Fatalf("restore summary %+v (the installed holder's session is %d)", r.sum, want)
		}
		sameState(t, c, 10*time.Second)
		for _, n := range c.Nodes {
			if _, ok := n.Session(between); !ok {
				t.Fatalf("%s: the session opened after the install is gone: the restore was installed twice", n.ID())
			}
			if h, held := n.Holder("between"); !held || h.Token != g.Token {
				t.Fatalf("%s: the lock granted after the install: %+v (held %v), want token %d", n.ID(), h, held, g.Token)
			}
			if h, held := n.Holder("from-backup"); !held || h.Session != first.Session {
				t.Fatalf("%s: the backup's holder %+v (held %v), want session %d as first installed", n.ID(), h, held, first.Session)
			}
		}
	})
}

// Issue 45 item 3: a restore at a leadership change never makes a token be
// issued twice. The old leader grants a token and is cut off before its
// followers learn that the grant committed; the new leader has the grant in
// its log but has not applied it when it learns that it leads. A restore
// there (a hook at that moment, before the takeover barrier) or after the
// barrier must count the old leader's grant: the next grant's token is
// above it. The entry stamps stand still (the WallClock test hook), so the
// takeover's RaiseTokens cannot hide a counter that went back.
func TestRestoreAtALeadershipChangeNeverReusesAToken(t *testing.T) {
	for _, when := range []string{"before the barrier", "after the barrier"} {
		t.Run(when, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				net := memnet.New()
				stamp := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
				c, li := readyCluster(t, clustertest.Options{Net: net, Configure: func(i int, cfg *node.Config) {
					nodeopts.Hooks(cfg).WallClock = func() time.Time { return stamp }
				}})
				ctx := context.Background()
				old := c.Nodes[li]
				f1 := c.Follower(li)
				f2 := 3 - li - f1
				backup := takeBackup(t, old, "from-backup")
				s := openSession(t, ctx, old, time.Minute)
				sameState(t, c, 5*time.Second)

				type restored struct {
					sum fsm.RestoreSummary
					err error
				}
				done := make(chan restored, 1)
				var armed atomic.Bool
				if when == "before the barrier" {
					node.OnLeading(c.Nodes[f2], func() {
						if !armed.CompareAndSwap(true, false) {
							return
						}
						rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
						defer cancel()
						sum, err := c.Nodes[f2].Operator().Restore(rctx, bytes.NewReader(backup))
						done <- restored{sum, err}
					})
				}
				// f1 gets nothing more from the old leader; f2 and f1 talk
				// slowly, so that the new leader's first entry takes a while
				// to commit.
				net.CutFlows(memnet.FlowFilter{From: c.RaftHost(li), To: c.RaftHost(f1)}, memnet.Forward)
				net.SetDelay(c.RaftHost(f1), c.RaftHost(f2), 20*time.Millisecond)
				net.SetDelay(c.RaftHost(f2), c.RaftHost(f1), 20*time.Millisecond)
				armed.Store(true)
				g := mustApply(t, old, fsm.Acquire{Session: s, Lock: "x", Owner: newOwner()}, fsmwire.StatusGranted)
				c.Isolate(li) // before the followers learn that the grant committed

				// f2 is the only follower with the grant in its log: only it
				// can win.
				c.Eventually(10*time.Second, func() (bool, string) {
					return c.Nodes[f2].IsLeader(), c.ID(f2) + " does not lead"
				})
				var r restored
				if when == "before the barrier" {
					select {
					case r = <-done:
					case <-time.After(30 * time.Second):
						t.Fatal("the restore at the leadership change never returned")
					}
				} else {
					armed.Store(false)
					c.Nodes[f2].WaitReady(ctx)
					rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
					r.sum, r.err = c.Nodes[f2].Operator().Restore(rctx, bytes.NewReader(backup))
					cancel()
				}
				if r.err != nil {
					t.Fatalf("restore on the new leader: %v", r.err)
				}
				if r.sum.LastToken < g.Token {
					t.Fatalf("the restore set the token counter to %d, below the token %d the old leader granted", r.sum.LastToken, g.Token)
				}
				n2 := c.Nodes[f2]
				s2 := openSession(t, ctx, n2, time.Minute)
				g2 := mustApply(t, n2, fsm.Acquire{Session: s2, Lock: "x", Owner: newOwner()}, fsmwire.StatusGranted)
				if g2.Token <= g.Token {
					t.Fatalf("token %d granted after the restore, not above the old leader's %d: a fence would admit both", g2.Token, g.Token)
				}
				c.Heal()
				net.ClearFlows()
				sameState(t, c, 10*time.Second)
			})
		})
	}
}

// A rolling upgrade: while one server supports only cluster version 3 the
// restore goes through hashicorp/raft's user restore, as the previous
// release does (through the leader and a follower), and the restore
// commands are refused. Once the cluster is at version 4 restores go
// through the log, and a leader refuses the previous form (the whole
// backup in one forwarded request) without installing anything.
func TestRestoreAcrossTheVersion4Upgrade(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var oldMax atomic.Uint64
		oldMax.Store(3)
		c := startWithOldServer(t, &oldMax)
		li := c.WaitLeader(time.Second)
		ctx := context.Background()
		backup := takeBackup(t, c.Nodes[li], "from-backup")
		if _, err := node.ProposeAsLeader(ctx, c.Nodes[li], fsm.RestoreAbort{ID: [16]byte{1}}); !errors.Is(err, node.ErrInvalidArgument) {
			t.Fatalf("a restore command at cluster version 3: %v", err)
		}
		for _, via := range []int{li, c.Follower(li)} {
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			sum, err := c.Nodes[via].Operator().Restore(rctx, bytes.NewReader(backup))
			cancel()
			if err != nil || sum.Held != 1 {
				t.Fatalf("restore through %s at cluster version 3: %+v %v", c.ID(via), sum, err)
			}
			sameState(t, c, 10*time.Second)
		}

		oldMax.Store(0) // upgraded
		waitClusterVersion(t, c, 4)
		li = c.WaitLeader(time.Second)
		leader := c.Nodes[li]
		s := openSession(t, ctx, leader, time.Minute)
		g := mustApply(t, leader, fsm.Acquire{Session: s, Lock: "live", Owner: newOwner()}, fsmwire.StatusGranted)
		hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		reply, err := node.HandleRPC(hctx, leader, node.LegacyRestoreRequest(backup))
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if err := node.AdminReplyErr(reply); !errors.Is(err, node.ErrRestoreReplicated) {
			t.Fatalf("the previous form of a forwarded restore at cluster version 4: %v", err)
		}
		if h, held := leader.Holder("live"); !held || h.Token != g.Token {
			t.Fatal("a refused restore changed the lock table")
		}
		for _, via := range []int{li, c.Follower(li)} {
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			sum, err := c.Nodes[via].Operator().Restore(rctx, bytes.NewReader(backup))
			cancel()
			if err != nil || sum.Held != 1 || sum.LastToken < g.Token {
				t.Fatalf("restore through %s at cluster version 4: %+v %v", c.ID(via), sum, err)
			}
			sameState(t, c, 10*time.Second)
		}
	})
}

// bigBackup returns a backup of locks held locks (over 100 sessions),
// their names padded to at least pad bytes, built on a state machine of
// its own.
func bigBackup(t testing.TB, locks, pad int) []byte {
	t.Helper()
	f := fsm.New(nil)
	index := uint64(0)
	apply := func(cmds ...fsm.Command) *fsm.Response {
		b, err := fsm.EncodeEntry(fsm.Entry{At: 1, Commands: cmds})
		if err != nil {
			t.Fatal(err)
		}
		index++
		r := f.Apply(&raft.Log{Type: raft.LogCommand, Index: index, Data: b}).(*fsm.Response)
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		return r
	}
	apply(fsm.SetClusterVersion{Version: fsm.MaxClusterVersion})
	var sessions []lockinfo.SessionID
	for range 100 {
		sessions = append(sessions, apply(fsm.OpenSession{TTL: time.Minute, Description: "backup"}).Results[0].Session)
	}
	var cmds []fsm.Command
	for i := range locks {
		name := fmt.Sprintf("tenant-%04d/resource-%08d", i%1000, i)
		name += strings.Repeat("-", max(0, pad-len(name)))
		cmds = append(cmds, fsm.Acquire{Session: sessions[i%len(sessions)], Lock: name, Owner: lockinfo.OwnerID{byte(i), byte(i >> 8), byte(i >> 16), 1}})
		if len(cmds) == 10000 || i == locks-1 {
			apply(cmds...)
			cmds = cmds[:0]
		}
	}
	var b bytes.Buffer
	if err := f.WriteSnapshot(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// A backup of several chunks restored through a follower: every chunk is
// forwarded and staged, the commit installs the whole backup on every
// replica, and sessions of other replicas are kept alive up to the
// restore's commit.
func TestRestoreOfAManyChunkBackupThroughAFollower(t *testing.T) {
	backup := bigBackup(t, 5000, 450) // few locks: cheap to decode under -race
	if len(backup) < 2*(1<<20) {
		t.Fatalf("backup of %d bytes: fewer than 3 chunks", len(backup))
	}
	synctest.Test(t, func(t *testing.T) {
		c, li := readyCluster(t, clustertest.Options{})
		ctx := context.Background()
		f := c.Follower(li)
		other := c.Nodes[3-li-f]
		live := openSession(t, ctx, other, 5*time.Second)
		stop := make(chan struct{})
		kept := make(chan error, 1)
		go func() { // keepalives every second until the restore returned
			for {
				select {
				case <-stop:
					kept <- nil
					return
				case <-time.After(time.Second):
				}
				if err := replica.Of(other).KeepAlive(ctx, live); err != nil && !errors.Is(err, replica.ErrSessionExpired) {
					kept <- err
					return
				}
			}
		}()
		rctx, cancel := context.WithTimeout(ctx, time.Minute)
		sum, err := c.Nodes[f].Operator().Restore(rctx, bytes.NewReader(backup))
		cancel()
		close(stop)
		if err != nil {
			t.Fatal(err)
		}
		if kerr := <-kept; kerr != nil {
			t.Fatalf("a keepalive during the restore: %v", kerr)
		}
		if sum.Locks != 5000 || sum.Held != 5000 || sum.Sessions != 100 {
			t.Fatalf("summary %+v", sum)
		}
		sameState(t, c, 10*time.Second)
		for _, n := range c.Nodes {
			if st := n.Stats(); st.Held != 5000 {
				t.Fatalf("%s holds %d locks after the restore", n.ID(), st.Held)
			}
		}
	})
}
