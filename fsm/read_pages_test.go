package fsm

import (
	"cmp"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/lockinfo"
)

// A leader's keepalive asks Halted under the expiry mutex. With Halted
// behind the state's RWMutex, a reader in progress (a long listing) and an
// apply waiting for it (Go's RWMutex then queues new readers behind the
// writer) held up every keepalive: Halted must not wait for either.
func TestHaltedDoesNotWaitBehindAReader(t *testing.T) {
	h := newHarness(t)
	s := h.open(time.Minute, 0, "a")
	entry, err := EncodeEntry(Entry{At: h.now, Commands: []Command{Acquire{Session: s, Lock: "x", Owner: owner(1)}}})
	if err != nil {
		t.Fatal(err)
	}
	h.f.mu.RLock() // a listing in progress
	applied := make(chan *Response)
	go func() { applied <- h.f.applyEntry(h.index+1, entry) }()
	for h.f.mu.TryRLock() { // until the apply waits for the writer's lock
		h.f.mu.RUnlock()
		runtime.Gosched()
	}
	halted := make(chan error)
	go func() { halted <- h.f.Halted() }()
	select {
	case err := <-halted:
		if err != nil {
			t.Fatalf("Halted() = %v", err)
		}
	case <-time.After(10 * time.Second): // a deadlock detector, not a time bound: it never returns
		h.f.mu.RUnlock()
		<-applied
		<-halted
		t.Fatal("Halted waited behind a reader and an apply waiting for it")
	}
	h.f.mu.RUnlock()
	if r := <-applied; r.Err != nil || r.Results[0].Status != fsmwire.StatusGranted {
		t.Fatalf("the apply after the reader: %+v", r)
	}
}

// One page of a listing allocates what the page holds, not what the state
// holds: the read lock is held for the page, not for a scan of every lock
// (Locks sorted every matching name whatever the limit), every session
// (Sessions copied them all) or a whole queue (Lock copied every waiter).
func TestAPageCostsThePageNotTheState(t *testing.T) {
	small, large := stateOf(t, 1<<10, 1<<10, 2_000), stateOf(t, 1<<16, 1<<15, 20_000)
	for _, r := range []struct {
		what string
		read func(f *FSM)
	}{
		{"Locks, one lock", func(f *FSM) { firstLockPage(f) }},
		{"Sessions, one session", func(f *FSM) { firstSessionPage(f) }},
		{"Lock with a long queue", func(f *FSM) { f.Lock("queue") }},
	} {
		s, l := bytesPerRead(func() { r.read(small) }), bytesPerRead(func() { r.read(large) })
		if l > 2*s+16<<10 {
			t.Errorf("%s: %d bytes per read of the large state, %d of the small", r.what, l, s)
		}
	}
}

func firstLockPage(f *FSM) []lockinfo.LockInfo {
	page, _ := f.Locks("", "", 1)
	return page
}

func firstSessionPage(f *FSM) []lockinfo.SessionInfo {
	page, _ := f.Sessions(0, 1)
	return page
}

// stateOf has locks held locks, sessions sessions and a lock "queue" with
// waiters waiters.
func stateOf(t *testing.T, locks, sessions, waiters int) *FSM {
	h := newHarness(t)
	h.f, h.rec = New(nil), nil
	var batch []Command
	flush := func(force bool) {
		if len(batch) == 1000 || force && len(batch) > 0 {
			h.entry(batch...)
			batch = batch[:0]
		}
	}
	for range sessions {
		batch = append(batch, OpenSession{TTL: time.Minute})
		flush(false)
	}
	flush(true)
	for i := range locks {
		batch = append(batch, Acquire{Session: 1, Lock: "l" + strconv.Itoa(i), Owner: ownerN(i)})
		flush(false)
	}
	for i := range waiters + 1 {
		batch = append(batch, Acquire{Session: 2, Lock: "queue", Owner: ownerN(locks + i), Wait: true})
		flush(false)
	}
	flush(true)
	return h.f
}

// bytesPerRead is the heap allocated by one call of read.
func bytesPerRead(read func()) uint64 {
	read()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 10 {
		read()
	}
	runtime.ReadMemStats(&after)
	return (after.TotalAlloc - before.TotalAlloc) / 10
}

func TestLocksPages(t *testing.T) {
	h := newHarness(t)
	s := h.open(time.Minute, 0, "a")
	names := []string{"a", "b/1", "b/2", "b/3", "b/30", "c"}
	for i, n := range names {
		h.do(Acquire{Session: s, Lock: n, Owner: ownerN(i)})
	}
	for _, c := range []struct {
		prefix, after string
		limit         int
		want          []string
		more          bool
	}{
		{"", "", 0, names, false},
		{"", "", 2, []string{"a", "b/1"}, true},
		{"", "b/1", 2, []string{"b/2", "b/3"}, true},
		{"", "b/30", 2, []string{"c"}, false},
		{"", "c", 2, nil, false},
		{"b/", "", 3, []string{"b/1", "b/2", "b/3"}, true},
		{"b/", "b/3", 3, []string{"b/30"}, false},
		{"b/", "a", 9, []string{"b/1", "b/2", "b/3", "b/30"}, false}, // a cursor below the prefix
		{"b/", "b/2x", 9, []string{"b/3", "b/30"}, false},            // a name that is gone
		{"b/", "zz", 9, nil, false},                                  // beyond the prefix
		{"b/3", "", -5, []string{"b/3", "b/30"}, false},              // a limit out of range: 1,000
		{"d", "", 9, nil, false},
	} {
		page, more := h.f.Locks(c.prefix, c.after, c.limit)
		var got []string
		for _, li := range page {
			got = append(got, li.Name)
		}
		if !slices.Equal(got, c.want) || more != c.more {
			t.Errorf("Locks(%q, %q, %d) = %q, %v; want %q, %v", c.prefix, c.after, c.limit, got, more, c.want, c.more)
		}
	}
}

// A page longer than a chunk is read chunk by chunk: every lock and
// session once, in order, and more set exactly when items follow.
func TestPagesSpanChunks(t *testing.T) {
	h := newHarness(t)
	const n = 3*readChunk + 5
	var names []string
	for i := range n {
		h.open(time.Minute, 0, "s")
		name := fmt.Sprintf("l%04d", i)
		names = append(names, name)
		h.do(Acquire{Session: 1, Lock: name, Owner: ownerN(i)})
	}
	for _, limit := range []int{readChunk, readChunk + 1, 2*readChunk - 1, n - 1, n, n + 1, 0} {
		var got []string
		pages := 0
		for after, more := "", true; more; pages++ {
			var page []lockinfo.LockInfo
			page, more = h.f.Locks("l", after, limit)
			for _, li := range page {
				got = append(got, li.Name)
			}
			if more && len(page) != limit {
				t.Fatalf("limit %d: a page of %d with more", limit, len(page))
			}
			if len(page) > 0 {
				after = page[len(page)-1].Name
			}
		}
		if !slices.Equal(got, names) {
			t.Fatalf("limit %d: %d locks in %d pages, want %d", limit, len(got), pages, n)
		}
		var ids []lockinfo.SessionID
		for after, more := lockinfo.SessionID(0), true; more; {
			var page []lockinfo.SessionInfo
			page, more = h.f.Sessions(after, limit)
			for _, s := range page {
				ids = append(ids, s.ID)
			}
			if len(page) > 0 {
				after = page[len(page)-1].ID
			}
		}
		if len(ids) != n || !slices.IsSorted(ids) || ids[0] != 1 {
			t.Fatalf("limit %d: sessions %v", limit, ids)
		}
	}
}

// Lock lists at most 1,000 waiters and shared grants, a Locks page at
// most 8 of each, and both count them all; Waiters and SharedGrants page
// through all of them in order.
func TestLockListsBoundedDetail(t *testing.T) {
	h := atV3(t)
	s := h.open(time.Minute, 0, "many")
	const n = 2_500
	var batch []Command
	for i := range n {
		batch = append(batch, Acquire{Session: s, Lock: "r", Owner: ownerN(i), Shared: true})
	}
	batch = append(batch, Acquire{Session: s, Lock: "r", Owner: ownerN(n), Wait: true}) // a writer waits
	for i := range n {
		batch = append(batch, Acquire{Session: s, Lock: "r", Owner: ownerN(n + 1 + i), Shared: true, Wait: true})
	}
	h.entry(batch...)
	li, _ := h.f.Lock("r")
	if len(li.Shared) != 1000 || li.SharedCount != n || len(li.Waiters) != 1000 || li.WaiterCount != n+1 {
		t.Fatalf("Lock: %d shared of %d, %d waiters of %d", len(li.Shared), li.SharedCount, len(li.Waiters), li.WaiterCount)
	}
	page, _ := h.f.Locks("r", "", 1)
	if len(page) != 1 || len(page[0].Shared) != 8 || len(page[0].Waiters) != 8 || page[0].SharedCount != n || page[0].WaiterCount != n+1 {
		t.Fatalf("Locks: %+v", page)
	}
	for i, w := range allWaiters(h.f, "r") {
		if w.Owner != ownerN(n+i) {
			t.Fatalf("waiter %d: %s, want %s", i, w.Owner, ownerN(n+i))
		}
	}
	var shared []lockinfo.Holder
	for cursor := ""; ; {
		p, next, err := h.f.SharedGrants("r", cursor, 700)
		if err != nil {
			t.Fatal(err)
		}
		shared = append(shared, p...)
		if next == "" {
			break
		}
		cursor = next
	}
	if len(shared) != n {
		t.Fatalf("%d shared grants paged, want %d", len(shared), n)
	}
	for i, g := range shared {
		if g.Owner != ownerN(i) || !g.Shared || (i > 0 && g.Token <= shared[i-1].Token) || g.Description != "many" {
			t.Fatalf("shared grant %d: %+v", i, g)
		}
	}
	for _, bad := range []string{"x", "1", "1.", ".1", "1.0", "1.g", "-1.1", "1.1.1"} {
		if _, _, err := h.f.Waiters("r", bad, 1); !errors.Is(err, ErrInvalidCursor) {
			t.Errorf("Waiters cursor %q: %v", bad, err)
		}
		if _, _, err := h.f.SharedGrants("r", bad, 1); !errors.Is(err, ErrInvalidCursor) {
			t.Errorf("SharedGrants cursor %q: %v", bad, err)
		}
	}
	if p, next, err := h.f.Waiters("free", "", 5); p != nil || next != "" || err != nil {
		t.Errorf("Waiters of a lock not in use: %v %q %v", p, next, err)
	}
}

// The cursor contract, with the state changing between pages: items are
// listed in order; an item present whenever a page is read is listed (a
// lock, a session or a shared grant exactly once; a waiter at least once,
// twice only if it joined in the same entry as the last waiter of an
// earlier page).
func TestPagesUnderChange(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		h := atV3(rt)
		var sess []lockinfo.SessionID
		for i := range 6 {
			sess = append(sess, h.open(time.Minute, 0, strconv.Itoa(i)))
		}
		nextOwner := 0
		change := func(rt *rapid.T) {
			for range rapid.IntRange(0, 6).Draw(rt, "changes") {
				s := rapid.SampledFrom(sess).Draw(rt, "session")
				name := "k" + strconv.Itoa(rapid.IntRange(0, 12).Draw(rt, "lock"))
				switch rapid.IntRange(0, 5).Draw(rt, "op") {
				case 0, 1: // one entry of several acquisitions (waiters of one entry share its index)
					var cmds []Command
					for range rapid.IntRange(1, 4).Draw(rt, "n") {
						nextOwner++
						cmds = append(cmds, Acquire{Session: s, Lock: name, Owner: ownerN(nextOwner), Wait: true,
							Shared: rapid.Bool().Draw(rt, "shared")})
					}
					h.entry(cmds...)
				case 2, 3: // a random owner leaves
					h.do(Release{Lock: name, Owner: ownerN(rapid.IntRange(0, nextOwner).Draw(rt, "owner"))})
				case 4:
					if len(sess) > 2 {
						i := rapid.IntRange(0, len(sess)-1).Draw(rt, "close")
						h.do(CloseSession{Session: sess[i]})
						sess = slices.Delete(sess, i, i+1)
					}
				case 5:
					sess = append(sess, h.open(time.Minute, 0, "new"))
				}
			}
		}
		change(rt)
		limit := rapid.IntRange(1, 4).Draw(rt, "limit")

		// Locks.
		checkKeyedPages(rt, "locks", func() []string {
			var names []string
			for _, li := range allLocks(h.f) {
				names = append(names, li.Name)
			}
			return names
		}, func(after string) ([]string, bool) {
			page, more := h.f.Locks("", after, limit)
			var names []string
			for _, li := range page {
				names = append(names, li.Name)
			}
			return names, more
		}, change)
		checkKeyedPages(rt, "sessions", func() []lockinfo.SessionID {
			var ids []lockinfo.SessionID
			for _, s := range allSessions(h.f) {
				ids = append(ids, s.ID)
			}
			return ids
		}, func(after lockinfo.SessionID) ([]lockinfo.SessionID, bool) {
			page, more := h.f.Sessions(after, limit)
			var ids []lockinfo.SessionID
			for _, s := range page {
				ids = append(ids, s.ID)
			}
			return ids, more
		}, change)

		// One lock's waiters and shared grants.
		name := "k" + strconv.Itoa(rapid.IntRange(0, 12).Draw(rt, "listed lock"))
		var waiters []lockinfo.Waiter
		var cursors []uint64 // the enqueue index each page ended at
		inQueue := map[lockinfo.OwnerID]int{}
		pages := 0
		for cursor, first := "", true; first || cursor != ""; first, pages = false, pages+1 {
			li, _ := h.f.Lock(name)
			for _, w := range li.Waiters {
				inQueue[w.Owner]++
			}
			var page []lockinfo.Waiter
			var err error
			if page, cursor, err = h.f.Waiters(name, cursor, limit); err != nil {
				rt.Fatal(err)
			}
			waiters = append(waiters, page...)
			if len(page) > 0 {
				cursors = append(cursors, page[len(page)-1].EnqueuedIx)
			}
			change(rt)
		}
		count := map[lockinfo.OwnerID]int{}
		for i, w := range waiters {
			count[w.Owner]++
			if count[w.Owner] > 1 && !slices.Contains(cursors, w.EnqueuedIx) {
				rt.Fatalf("waiter %s (enqueued at %d) listed twice, not of a cursor's entry (%v)", w.Owner, w.EnqueuedIx, cursors)
			}
			if i > 0 && w.EnqueuedIx < waiters[i-1].EnqueuedIx && !slices.Contains(cursors, w.EnqueuedIx) {
				rt.Fatalf("waiters out of order: %d after %d", w.EnqueuedIx, waiters[i-1].EnqueuedIx)
			}
		}
		for o, n := range inQueue {
			if n == pages && count[o] == 0 {
				rt.Fatalf("waiter %s queued throughout, not listed", o)
			}
		}
		var grants []lockinfo.Holder
		held := map[lockinfo.OwnerID]int{}
		pages = 0
		for cursor, first := "", true; first || cursor != ""; first, pages = false, pages+1 {
			li, _ := h.f.Lock(name)
			for _, g := range li.Shared {
				held[g.Owner]++
			}
			var page []lockinfo.Holder
			var err error
			if page, cursor, err = h.f.SharedGrants(name, cursor, limit); err != nil {
				rt.Fatal(err)
			}
			grants = append(grants, page...)
			change(rt)
		}
		for i, g := range grants {
			if i > 0 && g.Token <= grants[i-1].Token {
				rt.Fatalf("shared grants out of order or twice: %d after %d", g.Token, grants[i-1].Token)
			}
		}
		for o, n := range held {
			if n == pages && !slices.ContainsFunc(grants, func(g lockinfo.Holder) bool { return g.Owner == o }) {
				rt.Fatalf("shared grant of %s held throughout, not listed", o)
			}
		}
		checkInvariants(rt, h.f)
	})
}

// checkKeyedPages reads a listing keyed by name or id page by page
// (page(after)), changing the state after each page, and checks that it
// lists keys in order, each once, and every key present whenever a page
// was read (all() before each page).
func checkKeyedPages[K cmp.Ordered](rt *rapid.T, what string, all func() []K, page func(after K) ([]K, bool), change func(*rapid.T)) {
	var listed []K
	present := map[K]int{} // key → pages it was present at
	pages := 0
	var after K
	for more := true; more; pages++ {
		for _, k := range all() {
			present[k]++
		}
		var keys []K
		keys, more = page(after)
		listed = append(listed, keys...)
		if len(keys) > 0 {
			after = keys[len(keys)-1]
		}
		change(rt)
	}
	if !slices.IsSorted(listed) || len(slices.Compact(slices.Clone(listed))) != len(listed) {
		rt.Fatalf("%s listed out of order or twice: %v", what, listed)
	}
	for k, n := range present {
		if n == pages && !slices.Contains(listed, k) {
			rt.Fatalf("%s: %v present throughout, not listed (%v)", what, k, listed)
		}
	}
}

func ExampleFSM_Locks() {
	f := New(nil)
	data, _ := EncodeEntry(Entry{Commands: []Command{OpenSession{TTL: time.Minute}}})
	f.applyEntry(1, data)
	for i := range 5 {
		data, _ = EncodeEntry(Entry{Commands: []Command{Acquire{Session: 1, Lock: fmt.Sprintf("job/%d", i), Owner: lockinfo.OwnerID{byte(i + 1)}}}})
		f.applyEntry(uint64(i+2), data)
	}
	for after, more := "", true; more; {
		var page []lockinfo.LockInfo
		page, more = f.Locks("job/", after, 2)
		var names []string
		for _, li := range page {
			names = append(names, li.Name)
		}
		fmt.Println(strings.Join(names, " "))
		if more {
			after = page[len(page)-1].Name
		}
	}
	// Output:
	// job/0 job/1
	// job/2 job/3
	// job/4
}
