package node

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/leasetrace"
)

// Lock-delays on the leader (see fsm.EndDelay).
//
// Cluster version 2: the leader times every lock-delay on its monotonic
// clock — from when it applies the entry that starts the delay, and, at its
// takeover (or when the version is raised), for every lock already delayed
// from when this replica applied that entry (applyTimes), or in full from
// now if it does not know (the delay came with a snapshot, or began at
// version 1) — and ends it with fsm.EndDelay{Lock, Token} when the time is
// up. A wall-clock step on any node changes nothing: a delay is never
// shortened (every replica applies the start after its commit) nor
// stalled, and leader changes cannot postpone its end without bound: it
// ends by LockDelay + E + 2·δ + λ after it began (E: the longest time
// without a leader that has taken over; δ: the longest commit latency; λ:
// a replica's apply lag), whatever the number of changes (the lease
// model's DelayCredit, internal/testing/model/lease). The elapsed part and the
// whole are counted on one replica's clock, so a clock that runs fast
// shortens a delay no more than when that replica times it from its start.
//
// Cluster version 1 (a rolling upgrade from the previous release): the
// delay ends at a leader wall-clock time recorded in the state, and the
// leader proposes a Tick once its wall clock (the WallClock test hook) — or the
// FSM's time, which never goes back at version 1 — has reached it, as the
// previous release does.

// delayTimer is one lock-delay being timed.
type delayTimer struct {
	ref  fsm.DelayRef
	at   time.Time
	slot int
}

func (d *delayTimer) dueAt() time.Time { return d.at }
func (d *delayTimer) setSlot(i int)    { d.slot = i }

// delayTimers are the delays a leader times (guarded by expiryManager.mu).
type delayTimers struct {
	byRef map[fsm.DelayRef]*delayTimer
	due   timeHeap[*delayTimer]
	// armedAll: every delay in the FSM has a timer (read after the takeover
	// and after a version change).
	armedAll bool
}

func (d *delayTimers) reset() { *d = delayTimers{} }

// arm times a delay to end at at, unless it is timed already; it reports
// whether that is earlier than wake (the loop must run sooner).
func (d *delayTimers) arm(ref fsm.DelayRef, at, wake time.Time) bool {
	if d.byRef == nil {
		d.byRef = make(map[fsm.DelayRef]*delayTimer)
	}
	if d.byRef[ref] != nil {
		return false
	}
	t := &delayTimer{ref: ref, at: at}
	d.byRef[ref] = t
	d.due.add(t)
	return at.Before(wake)
}

// takeDue removes and returns the delays due at now, and when the next one
// is (false if none).
func (d *delayTimers) takeDue(now time.Time) ([]fsm.DelayRef, time.Time, bool) {
	var refs []fsm.DelayRef
	for {
		t, ok := d.due.first()
		if !ok || t.at.After(now) {
			break
		}
		d.due.remove(t.slot)
		delete(d.byRef, t.ref)
		refs = append(refs, t.ref)
	}
	t, ok := d.due.first()
	if !ok {
		return refs, time.Time{}, false
	}
	return refs, t.at, true
}

// endDelays ends the lock-delays that are over (by the rules of the cluster
// version) and returns when it next needs to run (false: no delay pending).
func (m *expiryManager) endDelays(ctx context.Context) (time.Time, bool) {
	if m.h.fsm.ClusterVersion() < 2 {
		return m.tick(ctx)
	}
	m.mu.Lock()
	armed := m.delays.armedAll
	m.mu.Unlock()
	if !armed {
		delayed := m.h.fsm.DelayedLocks()
		now := time.Now()
		m.mu.Lock()
		for _, d := range delayed {
			from := now
			if t, ok := m.h.times.delayStart(d.DelayRef); ok {
				from = t
			}
			m.delays.arm(d.DelayRef, from.Add(d.For), m.wakeAt)
		}
		m.delays.armedAll = true
		m.mu.Unlock()
	}
	now := time.Now()
	m.mu.Lock()
	refs, next, ok := m.delays.takeDue(now)
	m.mu.Unlock()
	if len(refs) == 0 {
		return next, ok
	}
	slices.SortFunc(refs, func(a, b fsm.DelayRef) int { return cmp.Compare(a.Lock, b.Lock) })
	for len(refs) > 0 {
		chunk := refs[:min(len(refs), fsmwire.MaxExpireSessions)]
		refs = refs[len(chunk):]
		if s := m.h.traceSink(); s != nil {
			for _, ref := range chunk {
				s.Record(leasetrace.Event{At: time.Now().UnixNano(), Kind: leasetrace.ProposeEndDelay, Lock: ref.Lock, Token: uint64(ref.Token)})
			}
		}
		out := m.h.propose(ctx, fsm.EndDelay{Delays: chunk})
		if out.err == nil {
			m.h.delayEnded(true)
			m.h.log.Debug("lock-delays ended", "count", out.result().Count, "index", out.index)
			continue
		}
		m.h.delayEnded(false)
		m.h.log.Warn("proposing the end of lock-delays failed; will retry", "locks", len(chunk), "err", out.err)
		retry := time.Now().Add(m.h.heartbeat)
		m.mu.Lock()
		for _, ref := range chunk {
			m.delays.arm(ref, retry, m.wakeAt) // EndDelay names the delay: a retry cannot end a later one
		}
		m.mu.Unlock()
		if !ok || retry.Before(next) {
			next, ok = retry, true
		}
	}
	return next, ok
}

// tick applies the version-1 rule: propose a Tick once a delay's end (in
// leader wall-clock time) has come; return when the next one ends.
func (m *expiryManager) tick(ctx context.Context) (time.Time, bool) {
	for range 3 {
		end, ok := m.h.fsm.NextDelayEnd()
		if !ok {
			return time.Time{}, false
		}
		now := time.Now()
		clock := max(m.h.wallNow().UnixNano(), m.h.fsm.Stats().Clock) // the FSM's time never goes back at version 1
		if wait := time.Duration(end - clock); wait > 0 {
			return now.Add(wait), true
		}
		if out := m.h.propose(ctx, fsm.Tick{}); out.err != nil {
			m.h.log.Warn("proposing lock-delay tick failed; will retry", "err", out.err)
			return now.Add(m.h.heartbeat), true
		}
		if m.h.fsm.ClusterVersion() >= 2 {
			return now, true // raised meanwhile: the version-2 rules apply
		}
	}
	return time.Now().Add(m.h.heartbeat), true
}
