package fsm

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/raftlock/raftlock/internal/lockinfo"
)

// Listings come in pages. A page of locks or sessions is read in chunks of
// at most readChunk items, each under one hold of the state's read lock,
// in O(log n + chunk) — an ordered index of the lock names and of the
// session ids (cowMap.ascend) — and a page of one lock's waiters or shared
// grants under one hold, in O(log n + page): no listing holds up an apply
// for longer than a chunk or a page, however large the state (even when
// the reader is descheduled while it holds the lock). Each chunk is a
// consistent view of the state after one entry; the next chunk or page
// starts from a cursor (the last name, id or waiter listed), not from a
// position, so that what changed in between moves nothing:
//
//   - an item that exists from the first page to the last is listed
//     exactly once (a waiter: at least once, see Waiters);
//   - items are listed in order (names, ids, FIFO), never going back;
//   - an item created or removed while the pages are read may be listed
//     or not, and a listed item may have changed or gone by the time the
//     next chunk is read (each is as fresh as when it was read).
//
// Sessions get ever higher ids: one opened while the pages are read is
// listed if it still lives when the last page is read. A waiter joins the
// queue at its end: likewise.

// maxPage bounds every page of a listing (a limit outside [1, maxPage]
// means maxPage), and what Lock lists of one lock's waiters and shared
// grants.
const maxPage = 1000

// readChunk bounds the locks or sessions read under one hold of the read
// lock (a lock of a Locks page with its first waiters and grants costs
// about a microsecond).
const readChunk = 64

// listedPerLock is how many waiters and shared grants each lock of a Locks
// page lists (LockInfo.WaiterCount and SharedCount count them all).
const listedPerLock = 8

func pageLimit(limit int) int {
	if limit < 1 || limit > maxPage {
		return maxPage
	}
	return limit
}

// Locks returns a page of the locks whose names start with prefix, in name
// order, from the first name above after ("": from the first): at most
// limit locks (1 to 1,000; outside that, 1,000), each listing at most its
// first 8 waiters and shared grants (LockInfo.WaiterCount, SharedCount:
// all of them; Lock and Waiters list more). more reports whether locks
// follow: the next page is Locks(prefix, page[len(page)-1].Name, limit).
// See "Listings come in pages" above for what pages read while the state
// changes may miss or repeat.
func (f *FSM) Locks(prefix, after string, limit int) (page []lockinfo.LockInfo, more bool) {
	return readPage(f, pageLimit(limit), after, func(li lockinfo.LockInfo) string { return li.Name },
		func(st *state, after string, yield func(lockinfo.LockInfo) bool) {
			st.locks.ascend(max(prefix, after), func(name string, l *lock) bool {
				switch {
				case !strings.HasPrefix(name, prefix):
					return false
				case name == after:
					return true
				}
				return yield(st.lockInfo(name, l, listedPerLock))
			})
		})
}

// Sessions returns a page of the live sessions in id order, from the first
// id above after (0: from the first): at most limit sessions (1 to 1,000;
// outside that, 1,000). more reports whether sessions follow: the next
// page is Sessions(page[len(page)-1].ID, limit).
func (f *FSM) Sessions(after lockinfo.SessionID, limit int) (page []lockinfo.SessionInfo, more bool) {
	return readPage(f, pageLimit(limit), after, func(s lockinfo.SessionInfo) lockinfo.SessionID { return s.ID },
		func(st *state, after lockinfo.SessionID, yield func(lockinfo.SessionInfo) bool) {
			st.sessions.ascend(after+1, func(_ lockinfo.SessionID, s *session) bool { return yield(s.info()) })
		})
}

// SessionTTLs returns a page of the id, TTL and origin marker of the live
// sessions, in id order from the first id above after, at most limit (as
// Sessions): what a new leader needs to arm their deadlines, read a page at
// a time so that the takeover of a hundred thousand sessions never stops
// the applies.
func (f *FSM) SessionTTLs(after lockinfo.SessionID, limit int) (page []SessionTTL, more bool) {
	return readPage(f, pageLimit(limit), after, func(s SessionTTL) lockinfo.SessionID { return s.ID },
		func(st *state, after lockinfo.SessionID, yield func(SessionTTL) bool) {
			st.sessions.ascend(after+1, func(id lockinfo.SessionID, s *session) bool {
				t := SessionTTL{ID: id, TTL: durationOf(s.ttl)}
				if len(st.markers) > 0 {
					t.Origin = st.origin(s.renewedAt)
				}
				return yield(t)
			})
		})
}

// readPage reads a page of at most limit items from after, a chunk of at
// most readChunk under each hold of the read lock: scan yields the items
// that follow a cursor, in order, until yield returns false; key is an
// item's cursor. more reports whether items follow the page.
func readPage[T any, K any](f *FSM, limit int, after K, key func(T) K, scan func(st *state, after K, yield func(T) bool)) (page []T, more bool) {
	for {
		n, chunkMore := len(page), false
		want := min(readChunk, limit-len(page))
		f.mu.RLock()
		if page == nil {
			page = make([]T, 0, min(limit, readChunk))
		}
		scan(f.st, after, func(it T) bool {
			if len(page)-n == want {
				chunkMore = true
				return false
			}
			page = append(page, it)
			return true
		})
		f.mu.RUnlock()
		if !chunkMore || len(page) == limit {
			return page, chunkMore
		}
		after = key(page[len(page)-1])
	}
}

// Waiters returns a page of the lock's queue, in FIFO order, from cursor
// ("": from the front), at most limit waiters (1 to 1,000; outside that,
// 1,000), and the cursor of the next page ("" when the page reaches the end
// of the queue). A cursor is an opaque string; it names the place after the
// page's last waiter by that waiter's log index and a hash of its owner,
// and stays valid on every replica and across snapshots. A waiter that
// stays queued throughout is listed at least once; it is listed twice only
// if it joined the queue in the same log entry as the last waiter of the
// previous page and that waiter left the queue before the next page was
// read. A lock not in use gives an empty page. A cursor that does not
// parse: ErrInvalidCursor.
func (f *FSM) Waiters(name, cursor string, limit int) (page []lockinfo.Waiter, next string, err error) {
	err = f.readLock(name, cursor, func(l *lock, at slotCursor) {
		page, next = pageOf(&l.waiters, at, pageLimit(limit), func(w waiter) lockinfo.Waiter { return w.info() })
	})
	return page, next, err
}

// SharedGrants returns a page of the lock's shared grants (its readers, or
// a semaphore's holders) in grant (token) order, from cursor ("": from the
// first), at most limit (1 to 1,000; outside that, 1,000), and the cursor
// of the next page ("" at the end). As Waiters, but a grant that is held
// throughout is listed exactly once (each has a token of its own).
func (f *FSM) SharedGrants(name, cursor string, limit int) (page []lockinfo.Holder, next string, err error) {
	err = f.readLock(name, cursor, func(l *lock, at slotCursor) {
		if l.shared != nil {
			page, next = pageOf(l.shared, at, pageLimit(limit), func(h holder) lockinfo.Holder { return f.st.describeShared(l, h) })
		}
	})
	return page, next, err
}

// readLock parses cursor, then calls read under the read lock with the
// lock named name, if it is in use.
func (f *FSM) readLock(name, cursor string, read func(l *lock, at slotCursor)) error {
	at, err := parseCursor(cursor)
	if err != nil {
		return err
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	if l := f.st.locks.get(name); l != nil {
		read(l, at)
	}
	return nil
}

// pageOf returns at most limit items of q from the cursor, described by
// info, and the cursor after the last ("" if q ends there).
func pageOf[T any, P slot[T], R any](q *slots[T, P], at slotCursor, limit int, info func(T) R) ([]R, string) {
	var page []R
	i := q.head
	if at != (slotCursor{}) {
		i = q.slotAfter(at.key, at.tag)
	}
	var last P
	for ; i < len(q.items); i++ {
		it := P(&q.items[i])
		if it.slotOwner().IsZero() {
			continue
		}
		if len(page) == limit {
			return page, slotCursor{key: last.slotKey(), tag: ownerTag(last.slotOwner())}.String()
		}
		page = append(page, info(q.items[i]))
		last = it
	}
	return page, ""
}

// slotCursor is the place in a slots list after the item of key whose
// owner has the tag (ownerTag; zero: the front).
type slotCursor struct {
	key, tag uint64
}

func (c slotCursor) String() string {
	return strconv.FormatUint(c.key, 10) + "." + strconv.FormatUint(c.tag, 16)
}

func parseCursor(s string) (slotCursor, error) {
	if s == "" {
		return slotCursor{}, nil
	}
	key, tag, ok := strings.Cut(s, ".")
	c := slotCursor{}
	var err1, err2 error
	c.key, err1 = strconv.ParseUint(key, 10, 64)
	c.tag, err2 = strconv.ParseUint(tag, 16, 64)
	if !ok || err1 != nil || err2 != nil || c.tag == 0 {
		return slotCursor{}, fmt.Errorf("%w: %q", ErrInvalidCursor, s)
	}
	return c, nil
}

// ownerTag is a hash of an owner id (never 0): a cursor names a waiter by
// it without giving its owner id away (an owner id is what a release
// names).
func ownerTag(o lockinfo.OwnerID) uint64 { return max(hashString(string(o[:])), 1) }
