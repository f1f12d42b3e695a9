package chaos

import (
	"sync"
	"time"

	"github.com/raftlock/raftlock/internal/testing/clustertest"
	"github.com/raftlock/raftlock/node"
)

// The membership class (issue 13 #4, #5): a gossip cluster of 3 whose
// voter set grows, shrinks and is replaced while partitions and crashes
// happen — spare nodes join (some of them unreachable over Raft, as with a
// TLS mismatch), members are decommissioned (Leave), restarted gracefully
// (Close) or crash.
//
// The model of a correct cluster: a new member joins as a non-voter and is
// promoted only once it caught up and stayed healthy; a member Raft cannot
// reach is never a voter; an even number of voters does not last; removing
// a leaving voter keeps a quorum; Close is a restart. Probes check the
// consequences where they are unambiguous: with a quorum of the voters a
// correct cluster has up and connected, a fresh client is granted a lock.
func init() {
	register(&faultClass{
		name: "membership",
		shape: func(cfg *simConfig) {
			cfg.Nodes, cfg.Spare, cfg.Clients = 3, 4, 6
		},
		options: func(s *sim, o *clustertest.Options) {
			// The record of who departed must outlive the nemesis: the
			// heal at the end (healAll) and the checks after it ask gone;
			// dropped with the nemesis, decommissioned members were
			// started again on their data dirs (seed 20), which the
			// product rules out (node.Leave).
			s.t.Cleanup(func() { memberships.Delete(s) })
			o.Gossip = true
			o.Nodes = s.cfg.Nodes + s.cfg.Spare
			o.BootstrapExpect = s.cfg.Nodes
			for i := s.cfg.Nodes; i < o.Nodes; i++ {
				o.Deferred = append(o.Deferred, i)
			}
			seeds := []string{}
			for i := range s.cfg.Nodes {
				seeds = append(seeds, gossipAddrOf(o, i))
			}
			o.Configure = func(i int, c *node.Config) {
				c.ReapTimeout = 5 * time.Second
				if i >= s.cfg.Nodes {
					c.Gossip.Join = seeds
				}
			}
		},
		expect: func(s *sim) Expect {
			return Expect{Members: s.members(), OddVoters: true, StableFor: int64(10 * time.Second)}
		},
		nemesis: membershipNemesis,
		gone:    func(s *sim, i int) bool { return membershipOf(s).gone(i) },
	})
	ciDuration["membership"] = 40 * time.Second
}

// gossipAddrOf is node i's gossip address under o (before the cluster runs).
func gossipAddrOf(o *clustertest.Options, i int) string {
	if o.Subnet == 0 {
		return clustertest.GossipAddr(i)
	}
	return clustertest.GossipAddrIn(o.Subnet, i)
}

// membershipState tracks which spares were used and which nodes left.
type membershipState struct {
	mu       sync.Mutex
	initial  int          // initial members
	next     int          // next unused spare
	departed map[int]bool // decommissioned or dropped for good
	started  map[int]bool // spares started (launchSpare)
}

var memberships sync.Map // *sim → *membershipState, for the sim's whole run

func membershipOf(s *sim) *membershipState {
	v, _ := memberships.LoadOrStore(s, &membershipState{initial: s.cfg.Nodes, next: s.cfg.Nodes, departed: map[int]bool{}, started: map[int]bool{}})
	return v.(*membershipState)
}

func (m *membershipState) gone(i int) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.departed[i] || (i >= m.initial && !m.started[i])
}

// spare returns the next unused spare node, if any is left. It stays
// unused (down, gone) until launchSpare starts it: an episode that takes a
// spare and then gives up must not leave it to the heal, which would start
// it with the seeds it was configured with — the founders, who may all
// have been decommissioned by then (seed 6016: n7 alone, every seed gone).
func (m *membershipState) spare(s *sim) (int, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.next >= s.c.Size() {
		return 0, false
	}
	return m.next, true
}

// use records that spare i starts now.
func (m *membershipState) use(i int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.started[i] = true
	m.next = max(m.next, i+1)
}

func (m *membershipState) depart(i int) {
	m.mu.Lock()
	m.departed[i] = true
	m.mu.Unlock()
}

// launchSpare starts spare i for the first time, joining through the
// members running now — as an operator points a new node at the current
// members: the seeds configured at the start (the founders) may all have
// been decommissioned by then (seed 10), and a node whose seeds are all
// gone finds no cluster (Config.Join).
func (s *sim) launchSpare(i int) {
	var seeds []string
	for _, j := range s.live(i) {
		seeds = append(seeds, s.c.GossipAddr(j))
	}
	if len(seeds) == 0 {
		s.harnessError("membership: spare %s starts with no running member to join through", s.c.ID(i))
	} else {
		s.c.Reconfigure(i, func(c *node.Config) { c.Gossip.Join = seeds })
	}
	membershipOf(s).use(i)
	s.launch(i)
}

// live returns the running members that did not leave, excluding excl.
func (s *sim) live(excl ...int) []int {
	m := membershipOf(s)
	var out []int
	for _, i := range s.others(excl...) {
		if !m.gone(i) {
			out = append(out, i)
		}
	}
	return out
}

func membershipNemesis(s *sim) {
	stabilize := 3 * time.Second
	for s.sleepUntilEnd(s.gap()) {
		switch k := s.rng.IntN(100); {
		case k < 20:
			s.crashOneCloseAnother()
		case k < 40:
			s.unreachableJoiner(stabilize)
		case k < 55:
			s.evenVoters(stabilize)
		case k < 70:
			s.growShrink(stabilize)
		case k < 85:
			s.replaceVoter(stabilize)
		default:
			s.mixedStep(s.rng.IntN(64)) // network faults and crashes; no quorum loss
		}
		s.settleEpisode()
	}
}

// originals returns the running initial members, shuffled.
func (s *sim) originals() []int {
	var out []int
	for _, i := range s.rng.Perm(s.cfg.Nodes) {
		if s.c.Nodes[i] != nil && !membershipOf(s).gone(i) {
			out = append(out, i)
		}
	}
	return out
}

// settleEpisode heals the network, starts every member that should run and
// checks that the cluster serves.
func (s *sim) settleEpisode() {
	s.c.Heal()
	for i := range s.c.Size() {
		if !s.gone(i) {
			s.launch(i)
		}
	}
	s.probeAny("after a membership episode, every member up", s.live(), probeBound)
}

// crashOneCloseAnother: one voter crashes, another is restarted gracefully
// (a rolling deploy); with the restarted one back, two of three run: the
// cluster must serve (13 #5).
func (s *sim) crashOneCloseAnother() {
	o := s.originals()
	if len(o) < 3 {
		return
	}
	x, y := o[0], o[1]
	done := s.fault("crash-one-close-another", "crash "+s.c.ID(x)+", close "+s.c.ID(y))
	defer done()
	s.crash(x)
	time.Sleep(time.Duration(s.rng.Int64N(int64(s.cfg.TTL))))
	s.stopNode(y, clustertest.Graceful)
	time.Sleep(time.Duration(s.rng.Int64N(int64(s.cfg.TTL))))
	s.launch(y)
	s.probeAny("one voter crashed, another restarted gracefully", []int{y, o[2]}, probeBound)
	s.launch(x)
}

// unreachableJoiner: a member joins whose Raft port nobody can reach (its
// gossip works); once things have settled a healthy voter crashes: the
// other two must still serve (13 #4).
func (s *sim) unreachableJoiner(stabilize time.Duration) {
	m := membershipOf(s)
	u, ok := m.spare(s)
	if !ok {
		return
	}
	o := s.originals()
	if len(o) < 3 {
		return
	}
	done := s.fault("unreachable-joiner", s.c.ID(u))
	defer done()
	from := now()
	s.c.IsolateRaft(u)
	s.launchSpare(u)
	time.Sleep(stabilize + time.Duration(s.rng.Int64N(int64(stabilize))))
	s.crash(o[0])
	s.probeAny("an unreachable member joined, then one voter crashed", o[1:], probeBound)
	s.launch(o[0])
	s.crash(u)
	m.depart(u)
	s.mu.Lock()
	s.h.Expect.Unreachable = append(s.h.Expect.Unreachable, Unreachable{ID: s.c.ID(u), From: from, To: now()})
	s.mu.Unlock()
	s.net.Rejoin(s.c.RaftHost(u))
}

// evenVoters: a fourth member joins a cluster of three; then it and one of
// the three crash: a correct cluster kept three voters, two of which run.
func (s *sim) evenVoters(stabilize time.Duration) {
	m := membershipOf(s)
	o := s.originals()
	if len(s.live()) != 3 || len(o) < 3 {
		return
	}
	f, ok := m.spare(s)
	if !ok {
		return
	}
	done := s.fault("fourth-member", s.c.ID(f))
	defer done()
	s.launchSpare(f)
	time.Sleep(stabilize + time.Duration(s.rng.Int64N(int64(stabilize))))
	s.crash(f)
	s.crash(o[0])
	s.probeAny("a fourth member joined, then it and one voter crashed", o[1:], probeBound)
	s.launch(o[0])
	s.launch(f)
}

// growShrink: two members join, then two members (any) are decommissioned.
func (s *sim) growShrink(stabilize time.Duration) {
	m := membershipOf(s)
	var added []int
	for range 2 {
		if i, ok := m.spare(s); ok {
			s.launchSpare(i)
			added = append(added, i)
		}
	}
	if len(added) < 2 {
		return
	}
	done := s.fault("grow-shrink", "joined "+s.ids(added))
	defer done()
	time.Sleep(stabilize + time.Duration(s.rng.Int64N(int64(stabilize))))
	s.probeAny("two members joined", s.live(), probeBound)
	live := s.live()
	for _, k := range s.rng.Perm(len(live))[:2] {
		s.stopNode(live[k], clustertest.Decommission)
		m.depart(live[k])
		s.probeAny("a member was decommissioned", s.live(), probeBound)
	}
}

// replaceVoter: a voter is decommissioned and a new member takes its place.
func (s *sim) replaceVoter(stabilize time.Duration) {
	m := membershipOf(s)
	live := s.live()
	if len(live) < 3 {
		return
	}
	x := live[s.rng.IntN(len(live))]
	y, ok := m.spare(s)
	if !ok {
		return
	}
	done := s.fault("replace-voter", s.c.ID(x)+" by "+s.c.ID(y))
	defer done()
	s.stopNode(x, clustertest.Decommission)
	m.depart(x)
	s.launchSpare(y)
	time.Sleep(stabilize)
	s.probeAny("a voter was replaced", s.live(), probeBound)
}
