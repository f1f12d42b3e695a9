package node

import (
	"sync"
	"time"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/fsmwire"
)

// applyTimes is what every replica remembers, in memory, of when it applied
// two kinds of entries, so that when it becomes leader it times sessions
// and lock-delays from then rather than from its own takeover:
//
//   - each takeover marker (fsm.EventMarker, cluster version 4): a marked
//     session's deadline is markerApplied[origin] + TTL + ElectionTimeout
//     (expiryManager.takeOver);
//   - each entry that started a lock-delay (an fsm.EventReleased with
//     DelayFor > 0, keyed by its fsm.DelayRef): a new leader ends the delay
//     at that time + DelayFor (expiryManager.endDelays), so that leader
//     changes cannot postpone its end without bound.
//
// The times are this replica's monotonic clock, read when the observer is
// told of the entry — after its commit, so a deadline or a delay timed from
// them never ends before one timed by the leader that committed it. They
// are not state: a replica that installs a snapshot (a restart replays the
// latest one) knows none of the markers and delays it carried and counts
// them from the install — later, so safe — and then from its replay of the
// log that follows.
type applyTimes struct {
	mu        sync.Mutex
	markers   []markerTime // ascending index; the newest maxMarkerTimes
	delays    map[fsm.DelayRef]time.Time
	pruneAt   int       // prune delays once there are this many (delays that ended)
	installed time.Time // the last snapshot install; zero if none
}

type markerTime struct {
	index uint64
	at    time.Time
}

const (
	// maxMarkerTimes bounds the marker times kept: the state machine keeps
	// its 64 newest markers, the only ones a session can name.
	maxMarkerTimes = 64
	// minDelayPrune is the least number of delay times before a prune.
	minDelayPrune = 1024
)

// observe records the apply time now of the markers and delay starts
// among events (the observer, on the FSM goroutine). delayed lists the
// delays still pending, for a prune (called rarely).
func (a *applyTimes) observe(events []fsm.Event, now time.Time, delayed func() []fsm.DelayInfo) {
	var prune bool
	a.mu.Lock()
	for i := range events {
		e := &events[i]
		switch {
		case e.Kind == fsmwire.EventMarker:
			if n := len(a.markers); n > 0 && a.markers[n-1].index >= e.Index {
				continue
			}
			if len(a.markers) == maxMarkerTimes {
				a.markers = append(a.markers[:0], a.markers[1:]...)
			}
			a.markers = append(a.markers, markerTime{index: e.Index, at: now})
		case e.Kind == fsmwire.EventReleased && e.DelayFor > 0:
			if a.delays == nil {
				a.delays = make(map[fsm.DelayRef]time.Time)
			}
			a.delays[fsm.DelayRef{Lock: e.Lock, Token: e.DelayToken}] = now
			prune = len(a.delays) >= max(a.pruneAt, minDelayPrune)
		}
	}
	a.mu.Unlock()
	if prune {
		a.pruneDelays(delayed())
	}
}

// pruneDelays forgets the delays that are not pending any more.
func (a *applyTimes) pruneDelays(pending []fsm.DelayInfo) {
	a.mu.Lock()
	defer a.mu.Unlock()
	kept := make(map[fsm.DelayRef]time.Time, len(pending))
	for _, d := range pending {
		if t, ok := a.delays[d.DelayRef]; ok {
			kept[d.DelayRef] = t
		}
	}
	a.delays, a.pruneAt = kept, 2*len(kept)
}

// restored forgets every time: the snapshot installed at now carried
// markers and delays whose apply time this replica does not know.
func (a *applyTimes) restored(now time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.markers, a.delays, a.pruneAt, a.installed = nil, nil, 0, now
}

// restoredDelays forgets the delays' times: a restore command replaced the
// locks (the backup's delays may carry the lock and token of one this
// replica timed long ago), and kept the markers.
func (a *applyTimes) restoredDelays() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.delays, a.pruneAt = nil, 0
}

// marker returns when this replica applied the marker at index: its own
// apply time if it knows it; otherwise the marker came with a snapshot, and
// the install time (or, if none is known, now) is later than its apply
// anywhere.
func (a *applyTimes) marker(index uint64, now time.Time) time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, m := range a.markers {
		if m.index == index {
			return m.at
		}
	}
	if !a.installed.IsZero() {
		return a.installed
	}
	return now
}

// delayStart returns when this replica applied the start of the delay
// ref, and false if it does not know (a delay that came with a snapshot,
// or began at cluster version 1).
func (a *applyTimes) delayStart(ref fsm.DelayRef) (time.Time, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	t, ok := a.delays[ref]
	return t, ok
}
