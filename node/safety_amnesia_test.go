package node_test

import (
	"context"
	"os"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/replica"
	"github.com/raftlock/raftlock/internal/testing/clustertest"
	"github.com/raftlock/raftlock/internal/testing/memnet"
)

// Issue 13 #3. A grant is committed on {L, B} while C lags (cut off); B's
// data dir is wiped and B restarts with the same id and address (static
// Bootstrap + Peers, as configured); L dies. Before the fix B bootstrapped
// again and voted for C with an empty log: C led without the committed
// grant and granted the same lock to a second client (with a token the
// fence had seen). Required: B never votes as its old self — without L the
// cluster grants nothing; once L is back the grant is intact and B rejoins
// as a new member.
func TestSafetyWipedVoterDoesNotVote(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := memnet.New()
		c := clustertest.Start(t, clustertest.Options{Nodes: 3, Net: net, Durable: true})
		l := c.WaitLeader(20 * time.Second)
		c.WaitReady(20 * time.Second)
		b := (l + 1) % 3
		lag := (l + 2) % 3
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c.Isolate(lag)
		s := openSession(t, ctx, c.Nodes[l], time.Hour)
		owner := newOwner()
		g, err := replica.Of(c.Nodes[l]).Apply(ctx, fsm.Acquire{Session: s, Lock: "x", Owner: owner})
		if err != nil || g.Status != fsmwire.StatusGranted {
			t.Fatalf("grant on {L, B}: %v %+v", err, g)
		}

		c.Crash(b)
		if err := os.RemoveAll(c.Config(b).DataDir); err != nil {
			t.Fatal(err)
		}
		c.Crash(l)
		c.Heal()
		c.Restart(b)
		time.Sleep(3 * time.Second)
		for _, i := range []int{b, lag} {
			if tok := tryGrant(c.Nodes[i], "x", 5*time.Second); tok != 0 {
				t.Fatalf("lock x granted again (token %d, first grant %d) through %s while its holder's session lives: a wiped voter voted as its old self",
					tok, g.Token, c.Nodes[i].ID())
			}
		}

		// L comes back: the grant is intact, and B rejoins (as a new member,
		// promoted once it caught up).
		c.Restart(l)
		c.Eventually(60*time.Second, func() (bool, string) {
			for _, i := range []int{l, b, lag} {
				if h, ok := c.Nodes[i].Holder("x"); !ok || h.Owner != owner || h.Token != g.Token {
					return false, c.Nodes[i].ID() + " does not show the first grant"
				}
				st := c.Nodes[i].Status()
				voters := 0
				for _, sv := range st.Servers {
					if sv.Role == "voter" {
						voters++
					}
				}
				if voters != 3 || st.LeaderID == "" {
					return false, c.Nodes[i].ID() + " has " + servers5(c.Nodes[i])
				}
			}
			return true, ""
		})
		if tok := tryGrant(c.Nodes[b], "y", 10*time.Second); tok <= g.Token {
			t.Fatalf("after recovery: token %d, first grant %d", tok, g.Token)
		}
	})
}
