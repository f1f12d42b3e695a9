package chaos

import (
	"time"
)

// The disk class (issue 14 #2): a node's log store fails (ENOSPC on every
// append) or stalls (appends wait seconds). The node with the failing disk
// must stop serving while the others continue (probes through healthy
// nodes), nothing acknowledged may be lost (ack checks), and a release that
// could not commit in time must still happen: a stall of the followers'
// disks past the Unlock deadline (while keepalives, which skip the log,
// keep succeeding) must not leave the lock held by a session whose client
// has let go (ghost-holder at the end).
func init() {
	register(&faultClass{name: "disk", nemesis: diskNemesis})
	ciDuration["disk"] = 30 * time.Second
}

func diskNemesis(s *sim) {
	for s.sleepUntilEnd(s.gap()) {
		switch k := s.rng.IntN(100); {
		case k < 35:
			s.stallDisks(true)
		case k < 50:
			s.stallDisks(false)
		case k < 85:
			s.failDisk()
		default:
			s.mixedStep(s.rng.IntN(64))
		}
	}
}

// stallDisks stalls the log appends of every follower (or of the leader)
// for 2.5–4.5 TTLs: commits stop, leadership and keepalives do not.
func (s *sim) stallDisks(followers bool) {
	l, ok := s.leader()
	if !ok {
		return
	}
	targets := []int{l}
	kind := "stall-leader-disk"
	if followers {
		targets, kind = s.others(l), "stall-follower-disks"
	}
	d := 5*s.cfg.TTL/2 + time.Duration(s.rng.Int64N(int64(2*s.cfg.TTL)))
	done := s.fault(kind, s.ids(targets))
	until := time.Now().Add(d).UnixNano()
	for _, i := range targets {
		s.disk[i].stallUntil.Store(until)
	}
	time.Sleep(d)
	for _, i := range targets {
		s.disk[i].stallUntil.Store(0)
	}
	done()
}

// failDisk makes one node's log appends fail (a full disk), preferably the
// leader's; the others must go on serving. Then the disk is freed and the
// node restarted.
func (s *sim) failDisk() {
	i := s.rng.IntN(s.c.Size())
	if l, ok := s.leader(); ok && s.rng.IntN(2) == 0 {
		i = l
	}
	if s.c.Nodes[i] == nil {
		return
	}
	done := s.fault("disk-full", s.c.ID(i))
	defer done()
	s.disk[i].failing.Store(true)
	time.Sleep(s.cfg.TTL / 2)
	s.probeAny("disk full on "+s.c.ID(i)+": the others serve", s.others(i), probeBound)
	time.Sleep(s.hold())
	s.disk[i].failing.Store(false)
	s.crash(i)
	s.restart(i)
}
