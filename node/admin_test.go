package node_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/lockinfo"
	"github.com/raftlock/raftlock/internal/replica"
	"github.com/raftlock/raftlock/internal/testing/clustertest"
	"github.com/raftlock/raftlock/node"
)

func TestAdminRevoke(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, li := readyCluster(t, clustertest.Options{})
		ctx := context.Background()
		f := c.Follower(li)
		holderNode, waiterNode, admin := c.Nodes[f], c.Nodes[li], c.Nodes[3-f-li]
		a := openSession(t, ctx, holderNode, time.Minute)
		b := openSession(t, ctx, waiterNode, time.Minute)
		oa, ob := newOwner(), newOwner()
		sub, err := replica.Of(holderNode).Subscribe(replica.EventFilter{Owner: oa}, 16)
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Close()
		g := mustApply(t, holderNode, fsm.Acquire{Session: a, Lock: "x", Owner: oa}, fsmwire.StatusGranted)
		mustApply(t, waiterNode, fsm.Acquire{Session: b, Lock: "x", Owner: ob, Wait: true}, fsmwire.StatusQueued)

		if _, err := admin.Operator().Revoke(ctx, "x", g.Token+100, "ops", "wrong token"); !errors.Is(err, node.ErrNotHeld) {
			t.Fatalf("revoke with a token that does not hold: %v", err)
		}
		rv, err := admin.Operator().Revoke(ctx, "x", 0, "ops@test", "holder stuck")
		if err != nil {
			t.Fatal(err)
		}
		if rv.Holder.Token != g.Token || rv.Holder.Session != a {
			t.Fatalf("revoked %+v, want token %d of session %d", rv.Holder, g.Token, a)
		}
		// The holder's replica learns that its grant ended, and why.
		deadline := time.After(5 * time.Second)
		for got := false; !got; {
			select {
			case e := <-sub.C:
				got = e.Kind == fsmwire.EventReleased && e.Reason == fsmwire.ReasonRevoked && e.Token == g.Token
			case <-deadline:
				t.Fatal("the holder's replica saw no revocation")
			}
		}
		if err := admin.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		h, ok := admin.Holder("x")
		if !ok || h.Owner != ob || h.Token <= g.Token {
			t.Fatalf("after the revoke: holder %+v (held %v), want the waiter with a token above %d", h, ok, g.Token)
		}
		if _, ok := holderNode.Session(a); !ok {
			t.Fatal("the revoked holder's session ended")
		}
		if _, err := admin.Operator().Revoke(ctx, "x", g.Token, "ops", "retried"); !errors.Is(err, node.ErrNotHeld) {
			t.Fatalf("a retried revoke must not end the next grant: %v", err)
		}
	})
}

func TestAdminEndSession(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, li := readyCluster(t, clustertest.Options{})
		ctx := context.Background()
		f := c.Nodes[c.Follower(li)]
		s := openSession(t, ctx, f, time.Minute)
		mustApply(t, f, fsm.Acquire{Session: s, Lock: "x", Owner: newOwner()}, fsmwire.StatusGranted)
		if err := c.Nodes[li].Operator().EndSession(ctx, s, "ops", "runaway client"); err != nil {
			t.Fatal(err)
		}
		if err := f.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		if _, ok := f.Session(s); ok {
			t.Fatal("session still there")
		}
		if _, ok := f.Holder("x"); ok {
			t.Fatal("the ended session's lock is still held")
		}
		if err := replica.Of(f).KeepAlive(ctx, s); !errors.Is(err, replica.ErrSessionExpired) {
			t.Fatalf("keepalive of the ended session: %v", err)
		}
		if err := f.Operator().EndSession(ctx, s, "ops", "again"); !errors.Is(err, node.ErrNoSuchSession) {
			t.Fatalf("ending it again: %v", err)
		}
	})
}

// A backup taken on a follower and restored through another follower:
// every replica installs it, the token counter stays above every token
// granted in between, live sessions end, the backup's sessions come back
// under new ids holding their locks, and expire.
func TestAdminBackupRestore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, li := readyCluster(t, clustertest.Options{})
		ctx := context.Background()
		f1 := c.Nodes[c.Follower(li)]
		f2 := c.Nodes[3-li-c.Follower(li)]
		old := openSession(t, ctx, f1, 5*time.Second)
		g := mustApply(t, f1, fsm.Acquire{Session: old, Lock: "invoice:1", Owner: newOwner()}, fsmwire.StatusGranted)
		var backup bytes.Buffer
		info, err := f1.Operator().Backup(ctx, &backup)
		if err != nil {
			t.Fatal(err)
		}
		if info.LastToken != g.Token || info.Sessions != 1 || info.Bytes != int64(backup.Len()) {
			t.Fatalf("backup info %+v", info)
		}
		// After the backup: more grants, and a session that is alive now.
		live := openSession(t, ctx, f2, time.Minute)
		for range 5 {
			o := newOwner()
			mustApply(t, f2, fsm.Acquire{Session: live, Lock: "t", Owner: o}, fsmwire.StatusGranted)
			mustApply(t, f2, fsm.Release{Lock: "t", Owner: o}, fsmwire.StatusOK)
		}
		before := c.Nodes[li].Stats().LastToken

		if _, err := f2.Operator().Restore(ctx, bytes.NewReader([]byte("not a backup"))); !errors.Is(err, fsmwire.ErrInvalidSnapshot) {
			t.Fatalf("restoring garbage: %v", err)
		}
		sum, err := f2.Operator().Restore(ctx, bytes.NewReader(backup.Bytes()))
		if err != nil {
			t.Fatal(err)
		}
		if sum.LastToken != before || sum.BackupLastToken != g.Token || sum.Sessions != 1 || sum.Held != 1 {
			t.Fatalf("restore summary %+v (cluster's last token %d)", sum, before)
		}
		// Every replica has the same state.
		for _, n := range c.Nodes {
			if err := n.Sync(ctx); err != nil {
				t.Fatal(err)
			}
		}
		c.Eventually(5*time.Second, func() (bool, string) {
			_, d0 := replica.ServerOf(c.Nodes[0]).Digest()
			for _, n := range c.Nodes[1:] {
				if _, d := replica.ServerOf(n).Digest(); d != d0 {
					return false, n.ID() + " differs"
				}
			}
			return true, ""
		})
		restored := old + sum.SessionOffset
		h, ok := f1.Holder("invoice:1")
		if !ok || h.Session != restored || h.Token != g.Token {
			t.Fatalf("restored holder %+v (held %v), want session %d token %d", h, ok, restored, g.Token)
		}
		if err := replica.Of(f2).KeepAlive(ctx, live); !errors.Is(err, replica.ErrSessionExpired) {
			t.Fatalf("a session of the running cluster survived the restore: %v", err)
		}
		// New grants fence out both histories.
		s := openSession(t, ctx, f2, time.Minute)
		if s <= restored {
			t.Fatalf("new session %d not above the restored %d", s, restored)
		}
		r := mustApply(t, f2, fsm.Acquire{Session: s, Lock: "invoice:1", Owner: newOwner(), Wait: true}, fsmwire.StatusQueued)
		_ = r
		// The orphaned restored session expires; its lock passes on.
		c.Eventually(30*time.Second, func() (bool, string) {
			h, ok := f2.Holder("invoice:1")
			return ok && h.Session == s && h.Token > before, "restored holder not expired"
		})
	})
}

func TestAdminTransferLeadership(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, li := readyCluster(t, clustertest.Options{})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		f := c.Follower(li)
		to := 3 - f - li
		got, err := c.Nodes[f].Operator().TransferLeadership(ctx, c.ID(to))
		if err != nil {
			t.Fatal(err)
		}
		if got != c.ID(to) || c.WaitLeader(5*time.Second) != to {
			t.Fatalf("new leader %q, want %s", got, c.ID(to))
		}
		got, err = c.Nodes[to].Operator().TransferLeadership(ctx, "")
		if err != nil || got == c.ID(to) || got == "" {
			t.Fatalf("transfer to any voter: %q %v", got, err)
		}
		if _, err := c.Nodes[f].Operator().TransferLeadership(ctx, "nobody"); !errors.Is(err, node.ErrRefused) {
			t.Fatalf("transfer to a stranger: %v", err)
		}
	})
}

func TestAdminRemovePeer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, li := readyCluster(t, clustertest.Options{Nodes: 3, Configure: func(i int, cfg *node.Config) {
			cfg.ReapTimeout = time.Hour // only the operator removes it
		}})
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		f := c.Follower(li)
		other := c.Nodes[3-f-li]
		if err := other.Operator().RemovePeer(ctx, c.ID(f)); !errors.Is(err, node.ErrRefused) {
			t.Fatalf("removing a live peer: %v", err)
		}
		if err := other.Operator().RemovePeer(ctx, "stranger"); !errors.Is(err, node.ErrRefused) {
			t.Fatalf("removing a stranger: %v", err)
		}
		c.Crash(f)
		// Refused until the leader's probes see it down.
		var err error
		for {
			if err = other.Operator().RemovePeer(ctx, c.ID(f)); !errors.Is(err, node.ErrRefused) {
				break
			}
			time.Sleep(500 * time.Millisecond)
		}
		if err != nil {
			t.Fatal(err)
		}
		st := other.Status()
		if len(st.Servers) != 2 {
			t.Fatalf("servers after the removal: %+v", st.Servers)
		}
		for _, s := range st.Servers {
			if s.ID == c.ID(f) {
				t.Fatalf("%s still configured", c.ID(f))
			}
		}
	})
}

// Grants keep coming while the backup is restored: every grant committed
// after the restore has a token above every grant committed before it
// (the restore reads the running counter between two entries).
func TestAdminRestoreUnderLoad(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, li := readyCluster(t, clustertest.Options{})
		ctx := context.Background()
		f := c.Nodes[c.Follower(li)]
		var backup bytes.Buffer
		if _, err := f.Operator().Backup(ctx, &backup); err != nil {
			t.Fatal(err)
		}
		type grant struct {
			index uint64
			token lockinfo.Token
		}
		stop := make(chan struct{})
		results := make(chan []grant, 3)
		for w := range 3 {
			go func() {
				var out []grant
				n := c.Nodes[w]
				s := openSession(t, ctx, n, time.Minute)
				for range 400 { // bounded; paced on fake time
					select {
					case <-stop:
						results <- out
						return
					case <-time.After(5 * time.Millisecond):
					}
					o := newOwner()
					r, idx, err := replica.Of(n).Propose(ctx, fsm.Acquire{Session: s, Lock: "t" + n.ID(), Owner: o})
					if err != nil || r.Status != fsmwire.StatusGranted {
						// The restore ended this session: open another.
						s = openSession(t, ctx, n, time.Minute)
						continue
					}
					out = append(out, grant{idx, r.Token})
					replica.Of(n).Propose(ctx, fsm.Release{Lock: "t" + n.ID(), Owner: o})
				}
				results <- out
			}()
		}
		time.Sleep(200 * time.Millisecond)
		if _, err := c.Nodes[li].Operator().Restore(ctx, bytes.NewReader(backup.Bytes())); err != nil {
			t.Fatal(err)
		}
		restoredAt := replica.Of(f).AppliedIndex()
		time.Sleep(200 * time.Millisecond)
		close(stop)
		var before, after []grant
		for range 3 {
			for _, g := range <-results {
				if g.index < restoredAt {
					before = append(before, g)
				} else {
					after = append(after, g)
				}
			}
		}
		if len(before) == 0 || len(after) == 0 {
			t.Fatalf("grants before %d, after %d: the load did not span the restore", len(before), len(after))
		}
		var maxBefore lockinfo.Token
		for _, g := range before {
			maxBefore = max(maxBefore, g.token)
		}
		for _, g := range after {
			if g.token <= maxBefore && g.index > restoredAt {
				t.Fatalf("grant at index %d after the restore (index %d) has token %d, not above %d", g.index, restoredAt, g.token, maxBefore)
			}
		}
	})
}

func TestAdminPeersAndLeasesLeft(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, li := readyCluster(t, clustertest.Options{})
		ctx := context.Background()
		f := c.Follower(li)
		s := openSession(t, ctx, c.Nodes[f], 10*time.Second)
		left, err := replica.ServerOf(c.Nodes[f]).LeasesLeft(ctx, []lockinfo.SessionID{s, s + 1000})
		if err != nil {
			t.Fatal(err)
		}
		if d, ok := left[s]; !ok || d <= 0 || d > 10*time.Second+c.Nodes[li].Timing().ElectionTimeout {
			t.Fatalf("lease left %v (%v), want in (0, TTL]", d, ok)
		}
		if _, ok := left[s+1000]; ok || len(left) != 1 {
			t.Fatalf("an unknown session has a lease: %v", left)
		}
		if _, err := replica.ServerOf(c.Nodes[f]).LeasesLeft(ctx, make([]lockinfo.SessionID, 2000)); !errors.Is(err, node.ErrInvalidArgument) {
			t.Fatalf("too many sessions: %v", err)
		}
		c.Crash(3 - f - li)
		peers := c.Nodes[f].Peers(ctx)
		if len(peers) != 3 {
			t.Fatalf("peers %+v", peers)
		}
		for _, p := range peers {
			down := p.ID == c.ID(3-f-li)
			if p.Reachable == down || (down && p.Err == "") || (!down && (p.AppliedIndex == 0 || p.Role != node.RoleVoter)) {
				t.Fatalf("peer %+v (down: %v)", p, down)
			}
			if p.Leader != (p.ID == c.ID(li)) {
				t.Fatalf("peer %+v: leader flag wrong", p)
			}
		}
	})
}
