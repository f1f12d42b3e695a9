package chaos

import (
	"fmt"
	"time"
)

// The mixed class: the original nemesis — one fault at a time, each
// bounded, then healed: group partitions, leader isolation, one-way cuts,
// added latency, connection resets, crash + restart, process pauses past
// the TTL, quorum loss.
func init() {
	register(&faultClass{name: "mixed", nemesis: mixedNemesis})
}

func mixedNemesis(s *sim) {
	for {
		gap := s.gap()
		if !time.Now().Add(gap).Before(s.end) {
			time.Sleep(time.Until(s.end))
			return
		}
		time.Sleep(gap)
		s.mixedStep(s.rng.IntN(100))
	}
}

// mixedStep injects one fault of the mixed class (k in [0, 100) picks it)
// and heals it. Other classes mix these steps into theirs.
func (s *sim) mixedStep(k int) {
	ttl := s.cfg.TTL
	r := s.rng
	n := s.c.Size()
	hold := s.hold()
	switch {
	case k < 12:
		perm := r.Perm(n)
		cut := 1 + r.IntN(n/2) // minority size
		s.c.Partition(perm[:cut], perm[cut:])
		done := s.faultCut("partition", fmt.Sprint(perm[:cut], perm[cut:]), perm[:cut]) // from the cut on
		time.Sleep(hold)
		s.c.Heal()
		done()
	case k < 22:
		var cut []int // the isolated leader is cut off from every quorum
		if l, ok := s.leader(); ok {
			s.c.Isolate(l)
			cut = []int{l}
		}
		done := s.faultCut("isolate-leader", "", cut) // from the cut on
		time.Sleep(hold)
		s.c.Heal()
		done()
	case k < 32:
		done := s.fault("one-way", "")
		a, b := s.pair()
		s.net.Block(s.c.RaftHost(a), s.c.RaftHost(b))
		if r.IntN(2) == 0 { // the leader's outbound links too
			if l, ok := s.leader(); ok && l != a {
				s.net.Block(s.c.RaftHost(l), s.c.RaftHost(a))
			}
		}
		time.Sleep(hold)
		s.c.Heal()
		done()
	case k < 44:
		done := s.fault("delay", "")
		a := r.IntN(n)
		d := time.Duration(1+r.IntN(40)) * time.Millisecond
		for b := range n {
			if b != a {
				s.net.SetDelay(s.c.RaftHost(a), s.c.RaftHost(b), d)
				s.net.SetDelay(s.c.RaftHost(b), s.c.RaftHost(a), d)
			}
		}
		time.Sleep(hold)
		for b := range n {
			s.net.SetDelay(s.c.RaftHost(a), s.c.RaftHost(b), 0)
			s.net.SetDelay(s.c.RaftHost(b), s.c.RaftHost(a), 0)
		}
		done()
	case k < 52:
		done := s.fault("drop-conns", "")
		s.net.DropConns(s.c.RaftHost(r.IntN(n)), "")
		done()
	case k < 64:
		i := r.IntN(n)
		if r.IntN(3) == 0 {
			if l, ok := s.leader(); ok {
				i = l
			}
		}
		done := s.fault("crash-restart", s.c.ID(i))
		s.crash(i)
		time.Sleep(hold)
		if !s.gone(i) { // a node its class keeps down (decommissioned, a spare not yet used) stays down
			s.restart(i)
		}
		done()
	case k < 90:
		s.pause(ttl + ttl/2 + time.Duration(r.Int64N(int64(2*ttl))))
	default:
		// Quorum loss for longer than the TTL: no grants, no renewals;
		// every lease ends on its client.
		done := s.fault("quorum-loss", "")
		var groups [][]int
		for i := range n {
			groups = append(groups, []int{i})
		}
		s.c.Partition(groups...)
		time.Sleep(ttl + time.Duration(r.Int64N(int64(2*ttl))))
		s.c.Heal()
		done()
	}
}

// pause is a process pause longer than the TTL (GC, SIGSTOP, VM freeze):
// the replica and its clients stop for d; preferably one whose client
// holds a lease and has not written yet.
func (s *sim) pause(d time.Duration) {
	i := s.rng.IntN(s.c.Size())
	for w := range s.holding {
		if n := s.holding[w].Load(); n >= 0 {
			i = int(n)
			break
		}
	}
	done := s.fault("pause", s.c.ID(i))
	s.frozen[i].Store(time.Now().Add(d).UnixNano())
	s.c.Isolate(i)
	time.Sleep(d)
	s.c.Heal()
	s.frozen[i].Store(0)
	done()
}

func (s *sim) pair() (int, int) {
	n := s.c.Size()
	a := s.rng.IntN(n)
	b := (a + 1 + s.rng.IntN(n-1)) % n
	return a, b
}
