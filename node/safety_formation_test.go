package node_test

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/lockinfo"
	"github.com/raftlock/raftlock/internal/nodeopts"
	"github.com/raftlock/raftlock/internal/replica"
	"github.com/raftlock/raftlock/internal/testing/clustertest"
	"github.com/raftlock/raftlock/internal/testing/memnet"
	"github.com/raftlock/raftlock/node"
)

// Regression tests for the Safety I review (issue 13). Each one drives the
// scenario the review found and asserts the safe outcome; they use only the
// node API that existed before the fixes, so that they also run (and fail)
// on the code before them.

// tryGrant tries to take lock name through n within d, on a fresh session;
// it reports the token, or 0 if nothing was granted in time.
func tryGrant(n *node.Node, name string, d time.Duration) lockinfo.Token {
	tok, _ := grant(n, name, d)
	return tok
}

// grant opens a session through n and acquires name in it within d: the
// token, or why there is none.
func grant(n *node.Node, name string, d time.Duration) (lockinfo.Token, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	r, err := replica.Of(n).Apply(ctx, fsm.OpenSession{TTL: time.Hour})
	if err != nil {
		return 0, err
	}
	if r.Status != fsmwire.StatusOK {
		return 0, fmt.Errorf("open session: %v", r.Status)
	}
	g, err := replica.Of(n).Apply(ctx, fsm.Acquire{Session: r.Session, Lock: name, Owner: newOwner()})
	if err != nil {
		return 0, err
	}
	if g.Status != fsmwire.StatusGranted {
		return 0, fmt.Errorf("acquire: %v", g.Status)
	}
	return g.Token, nil
}

// Issue 13 #1. Five nodes with BootstrapExpect 3: n1, n2 and n3 start;
// n2 does not hear n1 and n3 (its gossip listener drops their packets,
// while its own packets reach them), so n1 and n3 see n2's agreement but n2
// does not see theirs; then a partition {n1,n3} | {n2,n4,n5} cuts n2 off,
// and n4 and n5 start on n2's side. Before the fix, n1 and n3 founded
// {n1,n2,n3}, n2's promise expired, and n2, n4 and n5 founded a second
// cluster: both sides granted the same lock with token 1. Required: never a
// grant on both sides, and one cluster after healing. (The partition comes
// at different moments of formation, 10 ms apart.)
func TestSafetyFormationSplitBrain(t *testing.T) {
	for step := range 30 {
		cut := 100*time.Millisecond + time.Duration(step)*10*time.Millisecond
		t.Run(cut.String(), func(t *testing.T) { formationRace(t, cut) })
	}
}

// deafListener drops incoming connections from the hosts in deaf (while on).
type deafListener struct {
	net.Listener
	on   *atomic.Bool
	deaf []string
}

func (l deafListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil || !l.on.Load() {
			return c, err
		}
		host, _, _ := net.SplitHostPort(c.RemoteAddr().String())
		if !slices.Contains(l.deaf, host) {
			return c, nil
		}
		c.Close()
	}
}

func formationRace(t *testing.T, cut time.Duration) {
	synctest.Test(t, func(t *testing.T) {
		net := memnet.New()
		hosts := func(ids ...int) []string {
			var out []string
			for _, i := range ids {
				out = append(out, clustertest.ID(i), clustertest.GossipHost(i))
			}
			return out
		}
		var deaf atomic.Bool
		deaf.Store(true)
		c := clustertest.Start(t, clustertest.Options{Nodes: 3, Net: net, Gossip: true, Configure: func(i int, cfg *node.Config) {
			if i != 1 {
				return
			}
			ln, err := net.Host(clustertest.GossipHost(1)).Listen(clustertest.GossipAddr(1))
			if err != nil {
				t.Fatal(err)
			}
			nodeopts.Hooks(cfg).GossipListener = deafListener{Listener: ln, on: &deaf, deaf: []string{clustertest.GossipHost(0), clustertest.GossipHost(2)}}
			nodeopts.Hooks(cfg).GossipDialer = net.Host(clustertest.GossipHost(1)).Dial
		}})
		time.Sleep(cut)
		net.Partition(hosts(0, 2), hosts(1, 3, 4))
		deaf.Store(false)
		time.Sleep(3 * time.Second) // n2's promise expires; it sees n1 and n3 fail
		for range 2 {
			c.Add(func(cfg *node.Config) { cfg.Gossip.Join = []string{clustertest.GossipAddr(1)} })
		}
		time.Sleep(5 * time.Second)
		grantedA := tryGrant(c.Nodes[0], "x", 3*time.Second)
		if grantedA == 0 {
			grantedA = tryGrant(c.Nodes[2], "x", 3*time.Second)
		}
		var grantedB lockinfo.Token
		for _, i := range []int{1, 3, 4} {
			if grantedB == 0 {
				grantedB = tryGrant(c.Nodes[i], "x", 3*time.Second)
			}
		}
		if grantedA != 0 && grantedB != 0 {
			t.Fatalf("split brain: lock x granted on both sides of the partition (tokens %d and %d): %s | %s | %s",
				grantedA, grantedB, servers5(c.Nodes[0]), servers5(c.Nodes[1]), servers5(c.Nodes[3]))
		}
		c.Heal()
		// After healing: one cluster that every node belongs to.
		c.Eventually(60*time.Second, func() (bool, string) {
			for _, n := range c.Nodes {
				if got := n.Status().Servers; len(got) != 5 || n.Status().LeaderID == "" {
					return false, n.ID() + " has " + servers5(n)
				}
			}
			return true, ""
		})
		if tok := tryGrant(c.Nodes[4], "y", 10*time.Second); tok == 0 {
			t.Fatal("no grant after healing")
		}
	})
}

func servers5(n *node.Node) string {
	return fmtRoles(servers(n)) + " leader " + n.Status().LeaderID
}
