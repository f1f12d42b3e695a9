package chaos

import (
	"time"

	"github.com/raftlock/raftlock/node"
)

// The amnesia class (issue 13 #3): a node's data dir is wiped (a replaced
// disk, an emptyDir volume) and it restarts with the same id and address,
// statically configured (Bootstrap + Peers) as an operator would restart it.
//
// The targeted episode is the review's schedule: a minority C lags (cut
// off) while the leader L and the rest of the majority commit; one of the
// majority, B, loses its disk and restarts empty; the rest of the majority
// (L included) crash; C comes back. With B voting as its old self, C and B
// form a quorum and elect a leader whose log lacks what {L, B} committed:
// the same tokens are granted again. A correct cluster treats B as a new
// member that cannot vote as its old self, so no leader is elected until
// the crashed nodes return.
func init() {
	register(&faultClass{name: "amnesia", nemesis: amnesiaNemesis})
	ciDuration["amnesia"] = 20 * time.Second
}

func amnesiaNemesis(s *sim) {
	for s.sleepUntilEnd(s.gap()) {
		switch k := s.rng.IntN(100); {
		case k < 80 && !s.whole(10*time.Second):
			// The previous wipe's replacement is not complete: wiping
			// another voter now would lose a majority's data, which only
			// disaster recovery can bring back. Faults of other kinds only.
			s.mixedStep(s.rng.IntN(100))
		case k < 60:
			s.amnesiaEpisode()
		case k < 80:
			i := s.rng.IntN(s.c.Size())
			done := s.fault("wipe-restart", s.c.ID(i))
			s.wipe(i)
			time.Sleep(s.hold())
			s.restart(i)
			done()
		default:
			s.mixedStep(s.rng.IntN(100))
		}
	}
}

// amnesiaEpisode runs the lagging-minority / wiped-voter schedule.
func (s *sim) amnesiaEpisode() {
	l, ok := s.waitLeader(5 * time.Second)
	if !ok {
		return
	}
	n := s.c.Size()
	q := n/2 + 1
	perm := s.rng.Perm(n)
	var majority, lagging []int
	majority = append(majority, l)
	for _, i := range perm {
		switch {
		case i == l:
		case len(majority) < q:
			majority = append(majority, i)
		default:
			lagging = append(lagging, i)
		}
	}
	b := majority[1]
	done := s.fault("amnesia", "lagging "+s.ids(lagging)+", wiped "+s.c.ID(b)+", crashed "+s.ids(majority[2:])+" and leader "+s.c.ID(l))
	defer done()
	for _, c := range lagging {
		s.c.Isolate(c)
	}
	time.Sleep(s.cfg.TTL + time.Duration(s.rng.Int64N(int64(s.cfg.TTL)))) // the majority commits meanwhile
	s.wipe(b)
	for _, i := range majority {
		if i != b {
			s.crash(i)
		}
	}
	s.restart(b) // same id, address and static config: it bootstraps again
	s.c.Heal()
	time.Sleep(2*s.cfg.TTL + time.Duration(s.rng.Int64N(int64(2*s.cfg.TTL))))
	for _, i := range majority {
		s.restart(i)
	}
}

// whole waits (bounded) until every node runs and is a voter under its
// current incarnation in the leader's configuration: a wiped node has been
// replaced and promoted again.
func (s *sim) whole(timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if l, ok := s.leader(); ok {
			current := map[string]string{} // node id → Raft id
			for _, n := range s.c.Nodes {
				if n != nil {
					current[n.ID()] = n.Status().RaftID
				}
			}
			voters := 0
			for _, sv := range s.c.Nodes[l].Status().Servers {
				if sv.Role == node.RoleVoter && current[sv.ID] == sv.RaftID {
					voters++
				}
			}
			if voters == s.c.Size() {
				return true
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}
