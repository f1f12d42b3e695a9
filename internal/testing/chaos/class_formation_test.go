package chaos

import (
	"fmt"
	"sort"
	"time"

	"github.com/raftlock/raftlock/internal/testing/clustertest"
	"github.com/raftlock/raftlock/node"
)

// The formation class (issue 13 #1): 2N−1 nodes with BootstrapExpect = N
// start in a random order while partitions (of gossip and Raft, or of
// gossip alone), one-way gossip cuts and crashes happen. No sequence of
// those may bootstrap two configurations (cluster-identity, log-matching),
// and once everything heals the nodes form one cluster that serves.
//
// The review's schedule is one of the sequences the nemesis draws: n1 and
// n3 see the three promises of {n1, n2, n3} and bootstrap; a cut keeps n2
// from seeing theirs until its promise expires; n2, n4, n5 agree on another
// set and bootstrap a second cluster.
func init() {
	register(&faultClass{
		name: "formation",
		shape: func(cfg *simConfig) {
			cfg.Nodes, cfg.Clients = 5, 6 // 2N−1 with N = 3
		},
		options: func(s *sim, o *clustertest.Options) {
			o.Gossip = true
			o.BootstrapExpect = (s.cfg.Nodes + 1) / 2
			var seeds []string
			for i := range s.cfg.Nodes {
				o.Deferred = append(o.Deferred, i)
				seeds = append(seeds, gossipAddrOf(o, i))
			}
			o.Configure = func(i int, c *node.Config) { c.Gossip.Join = seeds }
		},
		start:   formationStart,
		nemesis: formationNemesis,
	})
	ciDuration["formation"] = 15 * time.Second
}

// formationEvent is one step of the formation schedule.
type formationEvent struct {
	at   time.Duration
	what string
	do   func()
}

// formationStart launches the nodes on a seeded schedule of launches and
// faults, then heals, launches every node and waits (bounded) until each is
// ready.
func formationStart(s *sim) {
	n := s.c.Size()
	r := s.rng
	var evs []formationEvent
	window := 2 * time.Second
	gossip := func(is []int) []string {
		var hs []string
		for _, i := range is {
			hs = append(hs, s.c.GossipHost(i))
		}
		return hs
	}
	// The review's shape with seeded timing: N−1 nodes of a set S start;
	// the last one, b, starts a little later and hears everyone late (a
	// slow path into it, gossip and Raft), so the others see its promise
	// and bootstrap before b has seen theirs; a partition then separates
	// S∖{b} from b and the N−1 late nodes for longer than a promise lasts.
	launchAt := map[int]time.Duration{}
	targeted := r.IntN(4) != 0
	if targeted {
		expect := (n + 1) / 2
		perm := r.Perm(n)
		b, a, rest := perm[expect-1], perm[:expect-1], perm[expect:]
		for _, i := range a {
			launchAt[i] = 0
		}
		tb := 50 * time.Millisecond
		launchAt[b] = tb
		d := 100*time.Millisecond + time.Duration(r.Int64N(int64(150*time.Millisecond)))
		t1 := tb + 30*time.Millisecond + time.Duration(r.Int64N(int64(d-40*time.Millisecond)))
		for _, i := range rest {
			launchAt[i] = t1 + 50*time.Millisecond + time.Duration(r.Int64N(int64(500*time.Millisecond)))
		}
		dur := time.Second + time.Duration(r.Int64N(int64(2*time.Second)))
		other := append([]int{b}, rest...)
		desc := fmt.Sprintf("slow path into %s (%v) from its start; partition %s | %s at %v for %v", s.c.ID(b), d, s.ids(a), s.ids(other), t1, dur)
		var done func()
		evs = append(evs, formationEvent{tb + time.Millisecond, desc, func() { // once b has joined
			done = s.fault("formation-split", desc)
			for i := range n {
				if i != b {
					s.net.SetByteDelay(s.c.GossipHost(i), s.c.GossipHost(b), d)
					s.net.SetByteDelay(s.c.RaftHost(i), s.c.RaftHost(b), d)
				}
			}
		}}, formationEvent{t1, "partition", func() { s.c.Partition(a, other) }},
			formationEvent{t1 + dur, "heal", func() {
				s.c.Heal()
				s.net.ClearDelays()
				done()
			}})
	}
	for range noise(targeted, r.IntN(3)) {
		at := time.Duration(r.Int64N(int64(window)))
		dur := 200*time.Millisecond + time.Duration(r.Int64N(int64(2300*time.Millisecond)))
		perm := r.Perm(n)
		cut := 1 + r.IntN(n-1)
		a, b := perm[:cut], perm[cut:]
		switch r.IntN(4) {
		case 0:
			desc := fmt.Sprintf("partition %s | %s", s.ids(a), s.ids(b))
			var done func()
			evs = append(evs, formationEvent{at, desc, func() { done = s.fault("formation-partition", desc); s.c.Partition(a, b) }},
				formationEvent{at + dur, "heal", func() { s.c.Heal(); done() }})
		case 1:
			desc := fmt.Sprintf("gossip partition %s | %s", s.ids(a), s.ids(b))
			var done func()
			evs = append(evs, formationEvent{at, desc, func() { done = s.fault("formation-gossip-partition", desc); s.net.Partition(gossip(a), gossip(b)) }},
				formationEvent{at + dur, "heal", func() { s.c.Heal(); done() }})
		case 2:
			to := b[0]
			desc := fmt.Sprintf("gossip %s → %s cut", s.ids(a), s.c.ID(to))
			var done func()
			evs = append(evs, formationEvent{at, desc, func() {
				done = s.fault("formation-one-way", desc)
				for _, f := range a {
					s.net.Block(s.c.GossipHost(f), s.c.GossipHost(to))
				}
			}}, formationEvent{at + dur, "heal", func() { s.c.Heal(); done() }})
		default:
			k := perm[0]
			desc := "crash " + s.c.ID(k)
			var done func()
			evs = append(evs, formationEvent{at, desc, func() { done = s.fault("formation-crash", desc); s.crash(k) }},
				formationEvent{at + dur, "relaunch " + s.c.ID(k), func() { s.launch(k); done() }})
		}
	}
	for i, k := range r.Perm(n) {
		at, ok := launchAt[k]
		if !ok {
			at = time.Duration(i)*20*time.Millisecond + time.Duration(r.Int64N(int64(100*time.Millisecond)))
		}
		evs = append(evs, formationEvent{at, "launch " + s.c.ID(k), func() { s.launch(k) }})
	}
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].at < evs[j].at })
	start := time.Now()
	for _, e := range evs {
		time.Sleep(time.Until(start.Add(e.at)))
		e.do()
	}
	s.c.Heal()
	for i := range n {
		s.launch(i)
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, nd := range s.running() {
		ctx, cancel := contextUntil(deadline)
		if err := nd.WaitReady(ctx); err != nil {
			s.note("formation: %s not ready: %v", nd.ID(), err)
		}
		cancel()
	}
	// A rolling crash-restart right after formation: each node's log is read
	// while its bootstrap entry (index 1) is still there.
	for _, i := range r.Perm(n) {
		s.crash(i)
		s.launch(i)
	}
}

// noise is the number of random formation faults: none with the targeted
// schedule (they would disturb its timing), else 1 + k.
func noise(targeted bool, k int) int {
	if targeted {
		return 0
	}
	return 1 + k
}

// formationNemesis: once formed, crashes and partitions as in the mixed
// class (no quorum loss).
func formationNemesis(s *sim) {
	for s.sleepUntilEnd(s.gap()) {
		s.mixedStep(s.rng.IntN(64))
	}
}
