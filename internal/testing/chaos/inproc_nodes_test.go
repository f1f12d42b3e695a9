package chaos

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/raftlock/raftlock/internal/storage"
	"github.com/raftlock/raftlock/internal/testing/clustertest"
	"github.com/raftlock/raftlock/node"
)

// ---- nodes: stop, start, wipe; clocks; disks ----

// stopNode stops node i (mode: close, kill or leave), takes it from the
// workers and reads its data dir into the history.
func (s *sim) stopNode(i int, mode clustertest.StopMode) error {
	n := s.c.Nodes[i]
	if n == nil {
		return nil
	}
	s.nodes[i].Store(nil)
	commit := n.Status().CommitIndex
	err := s.c.TryStop(i, mode)
	s.col.stopped(n)
	s.readDisk(i, commit)
	if err != nil {
		s.note("%v", err)
	}
	return err
}

// launch starts node i (first start or restart) and publishes it.
func (s *sim) launch(i int) error {
	if s.c.Nodes[i] != nil {
		return nil
	}
	if err := s.c.TryLaunch(i); err != nil {
		s.note("%v", err)
		return err
	}
	s.up(i)
	return nil
}

func (s *sim) crash(i int)   { s.stopNode(i, clustertest.Crashed) }
func (s *sim) restart(i int) { s.launch(i) }

// wipe stops node i abruptly and deletes its data dir (amnesia).
func (s *sim) wipe(i int) {
	s.crash(i)
	s.c.Wipe(i)
}

// leader returns the index of a running node that believes it leads.
func (s *sim) leader() (int, bool) {
	for i, n := range s.c.Nodes {
		if n != nil && n.IsLeader() {
			return i, true
		}
	}
	return 0, false
}

// waitLeader waits (bounded) for a running node that believes it leads.
func (s *sim) waitLeader(timeout time.Duration) (int, bool) {
	deadline := time.Now().Add(timeout)
	for {
		if l, ok := s.leader(); ok {
			return l, true
		}
		if !time.Now().Before(deadline) {
			return 0, false
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// leaderAndFollower returns the leader and a running follower drawn from
// the seed; ok is false without a leader or without a running follower.
func (s *sim) leaderAndFollower() (l, f int, ok bool) {
	if l, ok = s.leader(); !ok {
		return 0, 0, false
	}
	fs := s.others(l)
	if len(fs) == 0 {
		return l, 0, false
	}
	return l, fs[s.rng.IntN(len(fs))], true
}

// others returns the running nodes other than the excluded ones.
func (s *sim) others(excl ...int) []int {
	var out []int
	for i, n := range s.c.Nodes {
		if n == nil {
			continue
		}
		skip := false
		for _, e := range excl {
			skip = skip || e == i
		}
		if !skip {
			out = append(out, i)
		}
	}
	return out
}

// ids names nodes by index.
func (s *sim) ids(is []int) string {
	var out []string
	for _, i := range is {
		out = append(out, s.c.ID(i))
	}
	return fmt.Sprint(out)
}

// ---- clocks (the WallClock test hook) ----

// clockState is one node's wall clock: time.Now plus an offset, plus a
// drift of rate parts per million since the drift began.
type clockState struct {
	offset atomic.Int64 // nanoseconds
	rate   atomic.Int64 // ppm
	since  atomic.Int64 // UnixNano when the drift began
}

func (s *sim) wallClock(i int) func() time.Time {
	c := &s.clocks[i]
	return func() time.Time {
		t := time.Now()
		off := c.offset.Load()
		if r := c.rate.Load(); r != 0 {
			off += (t.UnixNano() - c.since.Load()) * r / 1e6
		}
		return t.Add(time.Duration(off))
	}
}

// jumpClock sets node i's wall clock offset.
func (s *sim) jumpClock(i int, off time.Duration) { s.clocks[i].offset.Store(int64(off)) }

// driftClock makes node i's wall clock run ppm parts per million fast (or
// slow, if negative) from now on.
func (s *sim) driftClock(i int, ppm int64) {
	s.clocks[i].since.Store(now())
	s.clocks[i].rate.Store(ppm)
}

func (s *sim) resetClocks() {
	for i := range s.clocks {
		s.clocks[i].offset.Store(0)
		s.clocks[i].rate.Store(0)
	}
}

// ---- disks (the DiskFault test hook) ----

// diskState is one node's injected disk fault.
type diskState struct {
	failing    atomic.Bool  // log appends fail with ENOSPC
	stallUntil atomic.Int64 // log appends wait until then (UnixNano)
}

// errDisk is the injected disk error.
var errDisk = fmt.Errorf("chaos: disk full: %w", syscall.ENOSPC)

// diskFault is node i's DiskFault test hook. Only log appends fail or stall:
// hashicorp/raft panics when a stable-store write (the term) or a log read
// fails, which would take the whole in-process run down (the
// multi-process layer fills a real disk instead, panics included).
func (s *sim) diskFault(i int) func(storage.Op) error {
	d := &s.disk[i]
	return func(op storage.Op) error {
		if op != storage.OpAppend {
			return nil
		}
		if d.failing.Load() {
			return errDisk
		}
		if u := d.stallUntil.Load(); u != 0 {
			if wait := time.Until(time.Unix(0, u)); wait > 0 {
				time.Sleep(wait)
			}
		}
		return nil
	}
}

func (s *sim) resetDisks() {
	for i := range s.disk {
		s.disk[i].failing.Store(false)
		s.disk[i].stallUntil.Store(0)
	}
}

// ---- healing ----

// healAll undoes every fault at the end of the workload: network, flows,
// clocks, disks, pauses; nodes that are down and not gone are started.
func (s *sim) healAll() {
	s.c.Heal()
	s.net.ClearFlows()
	s.net.ClearDelays()
	for a := range s.c.Size() {
		s.frozen[a].Store(0)
	}
	s.resetClocks()
	s.resetDisks()
	for i := range s.c.Size() {
		if !s.gone(i) {
			s.launch(i)
		}
	}
}

// gone reports whether node i left for good (the class decommissioned it,
// or never meant to start it).
func (s *sim) gone(i int) bool {
	if s.class.gone != nil {
		return s.class.gone(s, i)
	}
	return false
}

// syncedNode returns a running node that is caught up with the leader.
func (s *sim) syncedNode(timeout time.Duration) (*node.Node, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var err error
	for ctx.Err() == nil {
		for _, n := range s.running() {
			if err = n.Sync(ctx); err == nil {
				return n, nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err == nil {
		err = errors.New("no running node")
	}
	return nil, err
}

// contextUntil is a context that ends at t.
func contextUntil(t time.Time) (context.Context, context.CancelFunc) {
	return context.WithDeadline(context.Background(), t)
}
