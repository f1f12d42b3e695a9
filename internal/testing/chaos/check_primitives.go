package chaos

import (
	"fmt"
	"sort"

	"github.com/raftlock/raftlock/fsm"
)

// The lock model extended to the primitives of cluster version 3 (read
// grants and counting semaphores; see the fsm package doc), as checker
// functions over two views of a run:
//
//   - the replicated log, as one replica applied it (its fsm.Events in
//     apply order): CheckPrimitivesLog;
//   - the clients' validity windows (from a grant's return to the earliest
//     of its release call, its loss and its lease deadline):
//     CheckPrimitiveWindows.
//
// Both check: no more than the limit's permits held at once on a
// semaphore, no reader while a writer holds the lock and at most one
// writer, and tokens strictly increasing over every grant of a name,
// whatever its kind.

// Checks of the primitives.
const (
	CheckPermitsOverLimit   = "permits-over-limit"   // a semaphore's permits held beyond its limit
	CheckReaderDuringWriter = "reader-during-writer" // a read grant while a write grant was held, or the reverse
	CheckTwoWriters         = "two-writers"          // two exclusive grants of a lock at once
	CheckPrimTokenOrder     = "prim-token-order"     // a grant whose token is not above every earlier grant's of the name
	CheckUnmatchedRelease   = "unmatched-release"    // a release of a grant the log never made (or made twice)
)

// primHold is a grant being held, in the log or by a client.
type primHold struct {
	token   uint64
	shared  bool
	permits int
}

// primName is what the checkers track of one name.
type primName struct {
	holds     map[string]primHold // by owner
	lastToken uint64
}

func (p *primName) state() (writers, readers, permits int) {
	for _, h := range p.holds {
		switch {
		case h.permits > 0:
			permits += h.permits
		case h.shared:
			readers++
		default:
			writers++
		}
	}
	return
}

// CheckPrimitivesLog checks the events of a replicated log in apply order
// (as one replica delivered them, complete: a replica that had to resync
// cannot be checked this way). limits gives the limit of each semaphore
// (names without a limit are checked for readers and writers only; a
// semaphore's grant carries its permits, so its limit is what bounds them).
// The invariants must hold at every entry boundary: within one entry a
// release precedes the grants it makes room for.
func CheckPrimitivesLog(events []fsm.Event, limits map[string]int) []Violation {
	log := make([]LogEvent, len(events))
	for i, e := range events {
		log[i] = logEvent(e, 0)
	}
	return primitivesLog(log, limits, nil)
}

// primitivesLog is CheckPrimitivesLog over log events (of every name it
// is given: the caller filters). restored, if set, gives the holds a
// restored event at position k brings back (nil: none known); every
// other hold ends there.
func primitivesLog(events []LogEvent, limits map[string]int, restored func(k int) []EndHold) []Violation {
	var out []Violation
	fail := func(check, lock, format string, args ...any) {
		out = append(out, Violation{Check: check, Lock: lock, Detail: fmt.Sprintf(format, args...)})
	}
	names := map[string]*primName{}
	get := func(n string) *primName {
		p := names[n]
		if p == nil {
			p = &primName{holds: map[string]primHold{}}
			names[n] = p
		}
		return p
	}
	touched := map[string]bool{}
	checkEntry := func(index uint64) {
		for n := range touched {
			w, r, permits := get(n).state()
			switch {
			case w > 1:
				fail(CheckTwoWriters, n, "%d exclusive grants after entry %d", w, index)
			case w > 0 && r > 0:
				fail(CheckReaderDuringWriter, n, "%d readers with a writer after entry %d", r, index)
			}
			if lim, ok := limits[n]; ok && lim > 0 && permits > lim {
				fail(CheckPermitsOverLimit, n, "%d permits held of %d after entry %d", permits, lim, index)
			}
		}
		clear(touched)
	}
	var index uint64
	for k, e := range events {
		if e.Index != index {
			checkEntry(index)
			index = e.Index
		}
		if e.Kind == EvRestored {
			for n, p := range names {
				clear(p.holds)
				touched[n] = true
			}
			if restored != nil {
				for _, r := range restored(k) {
					if _, ours := limits[r.Lock]; ours && !r.Waiter {
						get(r.Lock).holds[r.Owner] = primHold{token: r.Token, shared: r.Shared, permits: r.Permits}
						touched[r.Lock] = true
					}
				}
			}
			continue
		}
		p := get(e.Lock)
		switch e.Kind {
		case EvGranted:
			touched[e.Lock] = true
			if e.Token <= p.lastToken {
				fail(CheckPrimTokenOrder, e.Lock, "token %d at index %d after token %d", e.Token, e.Index, p.lastToken)
			}
			p.lastToken = max(p.lastToken, e.Token)
			if _, dup := p.holds[e.Owner]; dup {
				fail(CheckUnmatchedRelease, e.Lock, "owner %s granted twice (index %d)", e.Owner, e.Index)
			}
			p.holds[e.Owner] = primHold{token: e.Token, shared: e.Shared, permits: e.Permits}
		case EvReleased:
			touched[e.Lock] = true
			if h, ok := p.holds[e.Owner]; !ok || h.token != e.Token {
				fail(CheckUnmatchedRelease, e.Lock, "release of owner %s token %d at index %d that holds nothing", e.Owner, e.Token, e.Index)
			}
			delete(p.holds, e.Owner)
		}
	}
	checkEntry(index)
	return out
}

// PrimWindow is a client's validity window of one grant: [From, To) on the
// run's clock (To 0: held to the end).
type PrimWindow struct {
	Client  int
	Lock    string
	Token   uint64
	Shared  bool
	Permits int // a semaphore grant's permits; 0 for locks
	Limit   int // the semaphore's limit; 0 for locks
	From    int64
	To      int64
}

// CheckPrimitiveWindows checks the clients' validity windows: at no moment
// do windows of one semaphore hold more than its limit's permits, a read
// window overlap a write window, or two write windows overlap; and a write
// window's token exceeds every token whose window began before it, a read
// window's the token of every write window that began before it.
func CheckPrimitiveWindows(ws []PrimWindow) []Violation { return primitiveWindows(ws, nil) }

// primitiveWindows is CheckPrimitiveWindows where allowed, if set, says
// which windows may overlap a newer one all the same (the operator
// exception: overlapAllowed): those are left out when the newer one
// begins.
func primitiveWindows(ws []PrimWindow, allowed func(older, newer PrimWindow) bool) []Violation {
	var out []Violation
	byLock := map[string][]PrimWindow{}
	for _, w := range ws {
		byLock[w.Lock] = append(byLock[w.Lock], w)
	}
	locks := make([]string, 0, len(byLock))
	for n := range byLock {
		locks = append(locks, n)
	}
	sort.Strings(locks)
	for _, n := range locks {
		out = append(out, checkLockWindows(n, byLock[n], allowed)...)
	}
	return out
}

func checkLockWindows(name string, ws []PrimWindow, allowed func(older, newer PrimWindow) bool) []Violation {
	var out []Violation
	fail := func(check, format string, args ...any) {
		out = append(out, Violation{Check: check, Lock: name, Detail: fmt.Sprintf(format, args...)})
	}
	end := func(w PrimWindow) int64 {
		if w.To == 0 {
			return 1<<63 - 1
		}
		return w.To
	}
	// Sweep the window starts and ends in time order (ends first at a tie:
	// a window that ends when the next begins does not overlap it).
	type point struct {
		at    int64
		start bool
		w     PrimWindow
	}
	var pts []point
	for _, w := range ws {
		if end(w) <= w.From {
			continue
		}
		pts = append(pts, point{w.From, true, w}, point{end(w), false, w})
	}
	sort.SliceStable(pts, func(i, j int) bool {
		if pts[i].at != pts[j].at {
			return pts[i].at < pts[j].at
		}
		return !pts[i].start && pts[j].start
	})
	open := map[uint64]PrimWindow{}
	var maxStarted, writerStarted uint64
	for _, p := range pts {
		if !p.start {
			delete(open, p.w.Token)
			continue
		}
		w := p.w
		switch {
		case w.Permits > 0:
		case w.Shared && w.Token <= writerStarted:
			fail(CheckPrimTokenOrder, "read window token %d began after write window token %d", w.Token, writerStarted)
		case !w.Shared && w.Token <= maxStarted:
			fail(CheckPrimTokenOrder, "write window token %d began after a window with token %d", w.Token, maxStarted)
		}
		maxStarted = max(maxStarted, w.Token)
		if !w.Shared && w.Permits == 0 {
			writerStarted = max(writerStarted, w.Token)
		}
		open[w.Token] = w
		writers, readers, permits := 0, 0, 0
		for _, o := range open {
			if o.Token != w.Token && allowed != nil && allowed(o, w) {
				continue
			}
			switch {
			case o.Permits > 0:
				permits += o.Permits
			case o.Shared:
				readers++
			default:
				writers++
			}
		}
		switch {
		case writers > 1:
			fail(CheckTwoWriters, "%d write windows overlap at %d (token %d)", writers, p.at, w.Token)
		case writers > 0 && readers > 0:
			fail(CheckReaderDuringWriter, "%d read windows overlap a write window at %d (token %d)", readers, p.at, w.Token)
		}
		if w.Limit > 0 && permits > w.Limit {
			fail(CheckPermitsOverLimit, "%d permits in valid windows of %d at %d (token %d)", permits, w.Limit, p.at, w.Token)
		}
	}
	return out
}

// checkPrimitives checks the shared-grant names of the workload
// (History.Primitives) in the merged log, restores included, and in the
// clients' validity windows, with the operator exception.
func (c *checker) checkPrimitives() {
	if len(c.h.Primitives) == 0 {
		return
	}
	var events []LogEvent
	for _, e := range c.log {
		if c.primitive(e.Lock) || e.Kind == EvRestored {
			events = append(events, e)
		}
	}
	// Positions in events → positions in c.log, for the restores.
	pos := make([]int, 0, len(events))
	for k, e := range c.log {
		if c.primitive(e.Lock) || e.Kind == EvRestored {
			pos = append(pos, k)
		}
	}
	restored := func(k int) []EndHold { return c.installAt[pos[k]].restoredHolds() }
	for _, v := range primitivesLog(events, c.h.Primitives, restored) {
		c.fail(v.Check, v.Lock, "log: %s", v.Detail)
	}
	var ws []PrimWindow
	for _, op := range c.h.Ops {
		if !c.primitive(op.Lock) || !op.Kind.acquires() || op.Result != Granted {
			continue
		}
		ws = append(ws, PrimWindow{Client: op.Client, Lock: op.Lock, Token: op.Token, Shared: op.Shared, Permits: op.Permits,
			Limit: c.h.Primitives[op.Lock], From: op.Return, To: c.validTo[op.Token]})
	}
	ends := c.operatorEnds()
	allowed := func(older, newer PrimWindow) bool {
		to := older.To
		if to == 0 {
			to = c.h.End
		}
		return c.overlapAllowed(ends, older.Token, newer.Token, to)
	}
	for _, v := range primitiveWindows(ws, allowed) {
		c.fail(v.Check, v.Lock, "client windows: %s", v.Detail)
	}
}
