package fsm

import (
	"fmt"
	"slices"

	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/lockinfo"
)

// Shared grants, semaphores and values (the package doc states the
// rules).

// sharedCounts are counters of the shared grants, kept as they change so
// that Stats is O(1).
type sharedCounts struct {
	readers    int // read grants of locks
	semHolders int // grants of semaphores
	permits    int // permits held over all semaphores
	semaphores int // semaphores in use
}

// newLock adds the entry of a lock (limit 0) or a semaphore that is not in
// use yet.
func (st *state) newLock(name string, limit int) *lock {
	st.lockSeq++
	l := &lock{gen: st.gen, seq: st.lockSeq, limit: limit}
	st.locks.set(name, l)
	if limit > 0 {
		st.counts.semaphores++
	}
	return l
}

// conflict refuses an acquisition of another kind than the name in use: a
// lock asked for as a semaphore, a semaphore as a lock, or a semaphore
// with another limit. Result.Count is the limit in force (0: a lock).
func (l *lock) conflict(c Acquire) (Result, bool) {
	var reason string
	switch {
	case l.limit == c.Limit:
		return Result{}, false
	case l.limit == 0:
		reason = fmt.Sprintf("%q is a lock, not a semaphore", c.Lock)
	case c.Limit == 0:
		reason = fmt.Sprintf("%q is a semaphore of %d permits, not a lock", c.Lock, l.limit)
	default:
		reason = fmt.Sprintf("semaphore %q has a limit of %d, not %d", c.Lock, l.limit, c.Limit)
	}
	return Result{Status: fsmwire.StatusConflict, Session: c.Session, Count: l.limit, Reason: reason}, true
}

// grantOf returns the grant (exclusive or shared) of owner, if it holds one.
func (l *lock) grantOf(owner lockinfo.OwnerID) (holder, bool) {
	if l.held && l.holder.owner == owner {
		return l.holder, true
	}
	return l.shared.lookup(owner)
}

// sameKind reports whether the grant h is of the kind c asks for (a retry
// of the acquisition that made it).
func (l *lock) sameKind(h holder, c Acquire) bool {
	exclusive := l.held && l.holder.owner == h.owner
	return exclusive == (!c.Shared && c.Limit == 0) && h.permits == c.Permits
}

// admits reports whether the lock can grant the acquisition w now (queue
// order aside).
func (l *lock) admits(w waiter) bool {
	switch {
	case l.held || l.delayed:
		return false
	case l.limit > 0:
		return l.used+w.permits <= l.limit
	case w.shared:
		return true
	}
	return l.shared.len() == 0
}

func (st *state) addShared(l *lock, h holder) {
	if l.shared == nil {
		l.shared = newGrants()
	}
	l.shared.push(h) // a new grant's token is above every other
	if l.limit > 0 {
		l.used += h.permits
		st.counts.semHolders++
		st.counts.permits += h.permits
	} else {
		st.counts.readers++
	}
}

func (st *state) removeShared(l *lock, h holder) {
	if i := l.shared.find(h.owner); i >= 0 {
		l.shared.removeSlot(i)
	}
	if l.shared.len() == 0 {
		l.shared = nil
	}
	if l.limit > 0 {
		l.used -= h.permits
		st.counts.semHolders--
		st.counts.permits -= h.permits
	} else {
		st.counts.readers--
	}
}

// newGrants returns an empty list of shared grants with room for 8 in the
// same allocation: the readers a writer's release lets in at once, or a
// semaphore's first holders, cost one allocation, as the map of grants
// this list replaced did.
func newGrants() *grants {
	b := new(struct {
		grants
		room [8]holder
	})
	b.items = b.room[:0]
	return &b.grants
}

// cloneGrants returns a compacted copy of g (nil for none).
func cloneGrants(g *grants) *grants {
	if g.len() == 0 {
		return nil
	}
	if g.len() <= 8 && g.owners == nil {
		c := newGrants()
		for h := range g.all() {
			c.push(h)
		}
		return c
	}
	c := g.clone()
	return &c
}

// sharedOf returns the shared grants of the given owners, in grant order.
func (l *lock) sharedOf(owners []lockinfo.OwnerID) []holder {
	var at []int
	for _, o := range owners {
		if i := l.shared.find(o); i >= 0 {
			at = append(at, i)
		}
	}
	slices.Sort(at)
	out := make([]holder, len(at))
	for k, i := range at {
		out[k] = l.shared.at(i)
	}
	return out
}

// setValue replaces the value of a grant (SetValue).
func (a *applier) setValue(c SetValue) Result {
	st := a.st
	s := st.sessions.get(c.Session)
	if s == nil {
		return Result{Status: fsmwire.StatusNoSession}
	}
	l := st.locks.get(c.Lock)
	if l == nil {
		return Result{Status: fsmwire.StatusNotHolder}
	}
	h, ok := l.grantOf(c.Owner)
	if !ok || h.session != c.Session {
		return Result{Status: fsmwire.StatusNotHolder}
	}
	if r, refused := a.valueQuota(s, h.value, c.Value); refused {
		return r
	}
	if d := int64(len(c.Value) - len(h.value)); d != 0 {
		st.mutSession(c.Session).acqBytes += d
		st.use(s.node, usage{bytes: d})
	}
	l = st.mutLock(c.Lock)
	h.value = c.Value
	exclusive := l.held && l.holder.owner == c.Owner
	if exclusive {
		l.holder = h
	} else {
		l.shared.items[l.shared.find(c.Owner)] = h // found again: a private copy has other slots
	}
	a.emit(Event{Kind: fsmwire.EventValueSet, Lock: c.Lock, Session: h.session, Owner: h.owner, Token: h.token,
		Shared: !exclusive && l.limit == 0, Permits: h.permits, Value: h.value})
	return Result{Status: fsmwire.StatusOK, Session: c.Session, Token: h.token}
}

// raiseTokens raises the grant counter to the entry's time in
// microseconds (RaiseTokens).
func (a *applier) raiseTokens() Result {
	if floor := a.now / 1000; floor > 0 && uint64(floor) > a.st.tokenSeq {
		a.st.tokenSeq = uint64(floor)
		a.emit(Event{Kind: fsmwire.EventTokensRaised, Token: lockinfo.Token(floor)})
	}
	return Result{Status: fsmwire.StatusOK, Token: lockinfo.Token(a.st.tokenSeq)}
}
