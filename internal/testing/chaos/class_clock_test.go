package chaos

import (
	"fmt"
	"time"
)

// The clock class (issue 14 #3): wall clocks jump (±1 h, ±1 day) on the
// leader and on followers, and drift within the documented margin (5 %),
// through the WallClock test hook (the clock the leader stamps entries with and
// its lock-delay tick reads). The workers' sessions ask for a lock-delay;
// pauses expire sessions that hold locks, so locks enter lock-delay while
// clocks are off, and leaders change while they are in it.
//
// Nothing that safety depends on may follow a wall clock: a lock in
// lock-delay is not granted before the delay has passed in real time
// (lock-delay check), and no delay lasts much longer (every workload lock
// can be acquired at the end within the delay plus a bound; availability).
// A client-side clock-rate hook (the client's monotonic clock against the
// leader's) needs lockapi support and is not exercised here.
func init() {
	register(&faultClass{
		name:  "clock",
		shape: func(cfg *simConfig) { cfg.LockDelay = 2 * time.Second },
		expect: func(s *sim) Expect {
			s.h.StampsUnreliable = true
			return Expect{Members: s.members()}
		},
		nemesis: clockNemesis,
	})
	ciDuration["clock"] = 30 * time.Second
}

// jumps are the wall-clock offsets the nemesis sets.
var jumps = []time.Duration{time.Hour, -time.Hour, 24 * time.Hour, -24 * time.Hour, 10 * time.Second}

func clockNemesis(s *sim) {
	for s.sleepUntilEnd(s.gap()) {
		switch k := s.rng.IntN(100); {
		case k < 30:
			s.jumpLeader()
		case k < 60:
			s.skewedTakeover()
		case k < 75:
			s.drift()
		default:
			s.mixedStep(12 + s.rng.IntN(78)) // partitions, crashes, pauses
		}
	}
}

// jumpLeader moves the leader's wall clock by a jump for a while, during
// which a holder's process pauses past its TTL (its session expires: lock-
// delay begins on a clock that is off), then puts it back.
func (s *sim) jumpLeader() {
	l, ok := s.leader()
	if !ok {
		return
	}
	j := jumps[s.rng.IntN(len(jumps))]
	done := s.fault("clock-jump-leader", fmt.Sprintf("%s %+v", s.c.ID(l), j))
	s.jumpClock(l, j)
	time.Sleep(time.Duration(s.rng.Int64N(int64(s.cfg.TTL))))
	s.pause(s.cfg.TTL + s.cfg.TTL/2 + time.Duration(s.rng.Int64N(int64(s.cfg.TTL))))
	time.Sleep(s.hold())
	s.jumpClock(l, 0)
	done()
}

// skewedTakeover sets every follower's clock ahead (or behind), expires a
// holder's session (a pause) and, while its lock is in lock-delay, crashes
// the leader: a skewed node takes over the delay.
func (s *sim) skewedTakeover() {
	l, ok := s.leader()
	if !ok {
		return
	}
	j := jumps[s.rng.IntN(len(jumps))]
	done := s.fault("clock-skewed-takeover", fmt.Sprintf("followers of %s %+v", s.c.ID(l), j))
	defer done()
	for _, i := range s.others(l) {
		s.jumpClock(i, j)
	}
	p := s.cfg.TTL + s.cfg.TTL/2 + time.Duration(s.rng.Int64N(int64(s.cfg.TTL)))
	go s.pauseFollower(l, p)
	time.Sleep(s.cfg.TTL + time.Duration(s.rng.Int64N(int64(s.cfg.TTL/2))) + 200*time.Millisecond)
	s.crash(l)
	time.Sleep(p)
	s.restart(l)
	s.resetClocks()
}

// pauseFollower pauses a node other than l (preferably one whose client
// holds a lease) for d.
func (s *sim) pauseFollower(l int, d time.Duration) {
	cands := s.others(l)
	if len(cands) == 0 {
		return
	}
	i := cands[0]
	for w := range s.holding {
		if n := int(s.holding[w].Load()); n >= 0 && n != l {
			i = n
			break
		}
	}
	done := s.fault("pause", s.c.ID(i))
	s.frozen[i].Store(time.Now().Add(d).UnixNano())
	s.net.Isolate(s.c.RaftHost(i))
	time.Sleep(d)
	s.net.Rejoin(s.c.RaftHost(i))
	s.frozen[i].Store(0)
	done()
}

// drift makes every node's wall clock run fast or slow by up to 4 %
// (inside the documented 5 % margin) for a while, with pauses: nothing
// may break. Only the WallClock test hook drifts: leases and lock-delays are timed
// on the monotonic clock, which every node shares here, so this does not
// exercise the clock-rate margin itself.
func (s *sim) drift() {
	done := s.fault("clock-drift", "")
	for i := range s.c.Size() {
		s.driftClock(i, s.rng.Int64N(80001)-40000)
	}
	s.pause(s.cfg.TTL + s.cfg.TTL/2 + time.Duration(s.rng.Int64N(int64(s.cfg.TTL))))
	time.Sleep(s.hold())
	s.resetClocks()
	done()
}
