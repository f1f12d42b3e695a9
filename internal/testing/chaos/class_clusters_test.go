package chaos

import (
	"time"

	"github.com/raftlock/raftlock/internal/testing/clustertest"
	"github.com/raftlock/raftlock/node"
)

// The two-clusters class (issue 13 #2): two separate gossip clusters, A
// and B, share a network, each with its own workload. Then they meet: a
// node of one is restarted with the other's seeds, or with both its own and
// the other's (their gossip bridged). Each cluster must stay itself: its
// configurations name only its own members (cluster-identity), its
// replicas agree, its tokens are its own. A correct library refuses the
// stranger (another cluster id) instead of reconciling both into one
// configuration.
func init() {
	register(&faultClass{
		name: "clusters",
		shape: func(cfg *simConfig) {
			cfg.Nodes, cfg.Clients = 3, 4
		},
		options: func(s *sim, o *clustertest.Options) { o.Gossip = true },
		nemesis: clustersNemesis,
		second:  func(cfg simConfig) simConfig { return cfg },
	})
	ciDuration["clusters"] = 20 * time.Second
}

func clustersNemesis(s *sim) {
	b := s.other
	for s.sleepUntilEnd(s.gap()) {
		switch k := s.rng.IntN(100); {
		case k < 35:
			meet(s, b, false)
		case k < 60:
			meet(s, b, true)
		case k < 75:
			meet(b, s, s.rng.IntN(2) == 0)
		default:
			s.mixedStep(s.rng.IntN(64))
		}
	}
}

// meet restarts a node of x with the seeds of cluster y (bridge: its own
// seeds too).
func meet(x, y *sim, bridge bool) {
	i := x.rng.IntN(x.c.Size())
	var seeds []string
	if bridge {
		seeds = append(seeds, x.c.Config(i).Gossip.Join...)
	}
	for j := range y.c.Size() {
		seeds = append(seeds, y.c.GossipAddr(j))
	}
	kind := "restart-with-other-seeds"
	if bridge {
		kind = "gossip-bridged"
	}
	done := x.fault(kind, x.c.ID(i)+" joins "+y.ids([]int{0, 1, 2}))
	defer done()
	x.stopNode(i, x.stopMode())
	x.c.Reconfigure(i, func(c *node.Config) { c.Gossip.Join = seeds })
	x.launch(i)
	time.Sleep(2*x.cfg.TTL + time.Duration(x.rng.Int64N(int64(2*x.cfg.TTL))))
}
