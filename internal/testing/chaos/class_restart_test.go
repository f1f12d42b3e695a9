package chaos

import (
	"time"

	"github.com/raftlock/raftlock/internal/testing/clustertest"
)

// The restart class (issue 13 #6): the ordinary ways a deploy restarts a
// gossip cluster — rolling restarts (graceful and SIGKILL), stop-all and
// start-all in random orders, and starting only a subset that forms a
// quorum. A restarted member keeps its place in the configuration, so after
// each step the cluster serves again (probes), with its state intact and
// tokens increasing (the history).
func init() {
	register(&faultClass{
		name: "restart",
		options: func(s *sim, o *clustertest.Options) {
			o.Gossip = true
		},
		nemesis: restartNemesis,
	})
	ciDuration["restart"] = 30 * time.Second
}

func restartNemesis(s *sim) {
	for s.sleepUntilEnd(s.gap()) {
		switch k := s.rng.IntN(100); {
		case k < 20:
			s.rollingRestart(clustertest.Graceful)
		case k < 35:
			s.rollingRestart(clustertest.Crashed)
		case k < 70:
			s.stopAllStartAll(false)
		case k < 90:
			s.stopAllStartAll(true)
		default:
			s.mixedStep(s.rng.IntN(100))
		}
	}
}

// stopMode picks a graceful stop or a kill.
func (s *sim) stopMode() clustertest.StopMode {
	if s.rng.IntN(2) == 0 {
		return clustertest.Graceful
	}
	return clustertest.Crashed
}

// rollingRestart restarts every node in turn, one at a time; the cluster
// must serve while each one is down and after it is back.
func (s *sim) rollingRestart(mode clustertest.StopMode) {
	order := s.rng.Perm(s.c.Size())
	done := s.fault("rolling-restart-"+mode.String(), s.ids(order))
	defer done()
	for _, i := range order {
		s.stopNode(i, mode)
		s.probeAny("rolling restart: "+s.c.ID(i)+" down ("+mode.String()+")", s.others(i), probeBound)
		time.Sleep(time.Duration(s.rng.Int64N(int64(s.cfg.TTL))))
		s.launch(i)
		s.probeAny("rolling restart: "+s.c.ID(i)+" back", []int{i}, probeBound)
	}
}

// stopAllStartAll stops every node (each gracefully or killed) in a random
// order, then starts them in another random order — or first only a random
// subset that forms a quorum, which must serve on its own before the rest
// is started.
func (s *sim) stopAllStartAll(subset bool) {
	n := s.c.Size()
	stops := s.rng.Perm(n)
	starts := s.rng.Perm(n)
	kind := "stop-all-start-all"
	if subset {
		kind = "stop-all-start-quorum"
	}
	done := s.fault(kind, "stop "+s.ids(stops)+" start "+s.ids(starts))
	defer done()
	for _, i := range stops {
		s.stopNode(i, s.stopMode())
		time.Sleep(time.Duration(s.rng.Int64N(int64(s.cfg.TTL / 2))))
	}
	time.Sleep(time.Duration(s.rng.Int64N(int64(s.cfg.TTL))))
	first := starts
	if subset {
		first = starts[:n/2+1]
	}
	for _, i := range first {
		s.launch(i)
		time.Sleep(time.Duration(s.rng.Int64N(int64(s.cfg.TTL / 2))))
	}
	s.probeAny("after "+kind+": "+s.ids(first)+" started", first, probeBound)
	for _, i := range starts[len(first):] {
		s.launch(i)
	}
}
