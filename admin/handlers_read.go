package admin

import (
	"context"
	"fmt"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"time"

	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/lockinfo"
	"github.com/raftlock/raftlock/internal/replica"
	"github.com/raftlock/raftlock/lockapi"
)

// HolderJSON describes a lock's holder. LeaseLeftMS: how long the leader
// still lets its session live without a keepalive (absent when the leader
// could not be asked); TTLMS: its session's TTL.
type HolderJSON struct {
	Session          uint64 `json:"session"`
	Description      string `json:"description"`
	Token            uint64 `json:"token"`
	AcquiredAtUnixMS int64  `json:"acquired_at_unix_ms"`
	TTLMS            int64  `json:"ttl_ms,omitempty"`
	LeaseLeftMS      *int64 `json:"lease_left_ms,omitempty"`

	// Cluster version 3: a semaphore grant's permits, the grant's value.
	Permits int    `json:"permits,omitempty"`
	Value   string `json:"value,omitempty"`
}

// WaiterJSON describes one entry of a lock's FIFO queue: its place
// (1 = next; 0 on a page read from a cursor, where places are not
// counted), the session that waits and that session's description.
type WaiterJSON struct {
	Position         int    `json:"position"`
	Session          uint64 `json:"session"`
	Description      string `json:"description,omitempty"`
	EnqueuedAtUnixMS int64  `json:"enqueued_at_unix_ms"`

	// Cluster version 3: waits for a read grant, or for permits.
	Shared  bool `json:"shared,omitempty"`
	Permits int  `json:"permits,omitempty"`
}

// LockJSON describes a lock (GET /v1/locks/{name}, and each lock of
// GET /v1/locks). Waiters lists a page of the queue: GET /v1/locks/{name}
// lists at most ?waiters= (see Limits.MaxListedWaiters, and at most 1,000)
// from the front or from ?after= (the WaitersNext of the previous page),
// GET /v1/locks the first 8 of each lock; WaiterCount is the length of the
// whole queue. Stale: the answer is this node's local view while it is not
// ready (asked for with ?stale=1).
type LockJSON struct {
	Name             string       `json:"name"`
	Held             bool         `json:"held"`
	Holder           *HolderJSON  `json:"holder"`
	Waiters          []WaiterJSON `json:"waiters"`
	WaiterCount      int          `json:"waiter_count"`
	WaitersNext      string       `json:"waiters_next,omitempty"` // the ?after= of the next page of waiters (GET /v1/locks/{name})
	DelayUntilUnixMS int64        `json:"delay_until_unix_ms,omitempty"`
	Stale            bool         `json:"stale,omitempty"`

	// Cluster version 3: a page of the readers of a lock, or of a
	// semaphore's holders (in grant order; as many as waiters are listed,
	// from the front or from ?shared_after=, the SharedNext of the
	// previous page), how many there are, and a semaphore's limit and
	// permits held.
	Shared      []HolderJSON `json:"shared,omitempty"`
	SharedCount int          `json:"shared_count,omitempty"`
	SharedNext  string       `json:"shared_next,omitempty"`
	Limit       int          `json:"limit,omitempty"`
	Used        int          `json:"used,omitempty"`
}

// SessionJSON describes one session of the cluster (GET /v1/sessions).
type SessionJSON struct {
	ID              uint64 `json:"id"`
	Description     string `json:"description"`
	TTLMS           int64  `json:"ttl_ms"`
	LockDelayMS     int64  `json:"lock_delay_ms"`
	CreatedAtUnixMS int64  `json:"created_at_unix_ms"`
	Locks           int    `json:"locks"` // held or waited for
	LeaseLeftMS     *int64 `json:"lease_left_ms,omitempty"`
}

// apiHolder is a holder of the replica's state as lockapi shows it (the
// errors admin shares with lockapi carry lockapi.Holder).
func apiHolder(h lockinfo.Holder) lockapi.Holder {
	return lockapi.Holder{Session: lockapi.SessionID(h.Session), Owner: lockapi.OwnerID(h.Owner), Token: h.Token, AcquiredAt: h.AcquiredAt,
		AcquiredIdx: h.AcquiredIdx, Description: h.Description, Shared: h.Shared, Permits: h.Permits, Value: h.Value}
}

func holderJSON(h lockapi.Holder) *HolderJSON {
	if h.Session == 0 {
		return nil
	}
	return &HolderJSON{Session: uint64(h.Session), Description: h.Description, Token: h.Token, AcquiredAtUnixMS: nsToMS(h.AcquiredAt),
		Permits: h.Permits, Value: h.Value}
}

// holdersJSON describes shared grants (nil for none).
func holdersJSON(hs []lockinfo.Holder) []HolderJSON {
	var out []HolderJSON
	for _, h := range hs {
		out = append(out, *holderJSON(apiHolder(h)))
	}
	return out
}

// descriptions caches session descriptions for one answer: a queue is
// mostly a few sessions waiting many times, and each lookup takes the
// FSM's read lock.
type descriptions map[lockinfo.SessionID]lockinfo.SessionInfo

func (s *Server) describe(d descriptions, id lockinfo.SessionID) lockinfo.SessionInfo {
	si, ok := d[id]
	if !ok {
		si, _ = s.n.Session(id)
		d[id] = si
	}
	return si
}

// lockJSON describes li with at most maxWaiters of its waiters (and of its
// shared grants): linear in what it lists.
func (s *Server) lockJSON(li lockinfo.LockInfo, maxWaiters int, d descriptions) LockJSON {
	out := LockJSON{Name: li.Name, Held: li.Held, Waiters: []WaiterJSON{}, WaiterCount: li.WaiterCount, DelayUntilUnixMS: nsToMS(li.DelayUntil),
		SharedCount: li.SharedCount}
	if li.Held {
		out.Holder = holderJSON(apiHolder(li.Holder))
		if out.Holder != nil {
			out.Holder.TTLMS = s.describe(d, li.Holder.Session).TTL.Milliseconds()
		}
	}
	out.Limit, out.Used = li.Limit, li.Used
	out.Shared = holdersJSON(li.Shared[:min(len(li.Shared), maxWaiters)])
	out.Waiters = s.waitersJSON(li.Waiters[:min(len(li.Waiters), maxWaiters)], true, d)
	return out
}

// waitersJSON describes a page of a queue (numbered from 1 if it is the
// front of the queue).
func (s *Server) waitersJSON(page []lockinfo.Waiter, front bool, d descriptions) []WaiterJSON {
	out := make([]WaiterJSON, 0, len(page))
	for i, w := range page {
		wj := WaiterJSON{Session: uint64(w.Session), Description: s.describe(d, w.Session).Description, EnqueuedAtUnixMS: nsToMS(w.EnqueuedAt),
			Shared: w.Shared, Permits: w.Permits}
		if front {
			wj.Position = i + 1
		}
		out = append(out, wj)
	}
	return out
}

// leasesLeft asks the leader how long it lets these sessions live (best
// effort: a short bound, nothing on failure).
func (s *Server) leasesLeft(ctx context.Context, ids []lockinfo.SessionID) map[lockinfo.SessionID]time.Duration {
	slices.Sort(ids)
	ids = slices.Compact(ids)
	if len(ids) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	left, err := replica.ServerOf(s.n).LeasesLeft(ctx, ids[:min(len(ids), 1024)])
	if err != nil {
		return nil
	}
	return left
}

func msPtr(d time.Duration, ok bool) *int64 {
	if !ok {
		return nil
	}
	ms := d.Milliseconds()
	return &ms
}

func nsToMS(ns int64) int64 {
	if ns == 0 {
		return 0
	}
	return time.Unix(0, ns).UnixMilli()
}

// syncIf runs a linearizable read barrier when the request asks for one
// (?sync=1); it reports false after answering with the error.
func (s *Server) syncIf(w http.ResponseWriter, r *http.Request) bool {
	if !boolParam(r, "sync") {
		return true
	}
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	if err := s.n.Sync(ctx); err != nil {
		writeErr(w, err)
		return false
	}
	return true
}

func boolParam(r *http.Request, name string) bool {
	v := r.URL.Query().Get(name)
	return v != "" && v != "0" && v != "false"
}

// listingTurns bounds the listings (GET /v1/locks, /v1/locks/{name},
// /v1/sessions) served at a time to half the CPUs (at least one): a page
// of 1,000 locks costs milliseconds of CPU to read and encode, and clients
// listing back to back would otherwise take every CPU from Raft and the
// keepalives. The others wait their turn, first come first served, until
// their request ends.
type listingTurns chan struct{}

func newListingTurns() listingTurns { return make(listingTurns, max(1, runtime.GOMAXPROCS(0)/2)) }

// take waits for a turn; it reports false (and answers 503) if the request
// or the server ends first. The caller calls done when it is.
func (t listingTurns) take(w http.ResponseWriter, r *http.Request, stop <-chan struct{}) bool {
	select {
	case t <- struct{}{}:
		return true
	case <-r.Context().Done():
	case <-stop:
	}
	writeJSON(w, http.StatusServiceUnavailable, ErrorJSON{Error: ErrKindNotReady, Detail: "no turn to list before the request ended"})
	return false
}

func (t listingTurns) done() { <-t }

// readLocal is the prelude of every read of the local view: ?sync=1 first
// (syncIf), then readable. It reports false once it has answered.
func (s *Server) readLocal(w http.ResponseWriter, r *http.Request) (stale, ok bool) {
	if !s.syncIf(w, r) {
		return false, false
	}
	return s.readable(w, r)
}

// readable reports whether the local view of the locks may be served: the
// node is ready, or the caller asked for the stale local view (?stale=1).
// Otherwise it answers 503 not_ready: a node in no cluster, or without a
// leader, cannot tell whether a lock is held.
func (s *Server) readable(w http.ResponseWriter, r *http.Request) (stale, ok bool) {
	h := assess(s.n.Status(), nil, s.n.Timing(), time.Now())
	if h.Ready {
		return false, true
	}
	if boolParam(r, "stale") {
		return true, true
	}
	writeJSON(w, http.StatusServiceUnavailable, ErrorJSON{Error: ErrKindNotReady,
		Detail: fmt.Sprintf("the answer is unknown: this node is not ready (%s); ?stale=1 gives its local view", h.Reasons[0])})
	return false, false
}

// listParam reads a positive integer query parameter at most max (absent:
// def); it reports false after answering 400.
func listParam(w http.ResponseWriter, r *http.Request, name string, def, max int) (int, bool) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, true
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > max {
		writeBad(w, fmt.Sprintf("%s: want an integer in [1, %d]", name, max))
		return 0, false
	}
	return n, true
}

func (s *Server) lock(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if err := fsmwire.ValidateLockName(name); err != nil {
		writeBad(w, "lock: "+public(err.Error()))
		return
	}
	waiters, ok := listParam(w, r, "waiters", s.limits.MaxListedWaiters, s.limits.MaxListedWaiters)
	if !ok {
		return
	}
	after, sharedAfter := r.URL.Query().Get("after"), r.URL.Query().Get("shared_after")
	stale, ok := s.readLocal(w, r)
	if !ok || !s.reads.take(w, r, s.ctx.Done()) {
		return
	}
	defer s.reads.done()
	li, found := s.n.Lock(name)
	if !found {
		li = lockinfo.LockInfo{Name: name}
	}
	d := descriptions{}
	out := s.lockJSON(li, waiters, d)
	out.Stale = stale
	if after != "" || li.WaiterCount > len(out.Waiters) {
		// A page of the queue read on its own: from the cursor, or past
		// what Lock lists.
		page, next, err := s.n.Waiters(name, after, waiters)
		if err != nil {
			writeBad(w, "after: not a cursor of this lock's waiters")
			return
		}
		out.Waiters, out.WaitersNext = s.waitersJSON(page, after == "", d), next
	}
	if sharedAfter != "" || li.SharedCount > len(out.Shared) {
		page, next, err := s.n.SharedGrants(name, sharedAfter, waiters)
		if err != nil {
			writeBad(w, "shared_after: not a cursor of this lock's shared grants")
			return
		}
		out.Shared, out.SharedNext = holdersJSON(page), next
	}
	if out.Holder != nil {
		d, ok := s.leasesLeft(r.Context(), []lockinfo.SessionID{li.Holder.Session})[li.Holder.Session]
		out.Holder.LeaseLeftMS = msPtr(d, ok)
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) locks(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit, ok := listParam(w, r, "limit", s.limits.MaxListedLocks, s.limits.MaxListedLocks)
	if !ok {
		return
	}
	waiters, ok := listParam(w, r, "waiters", s.limits.MaxListedWaiters, s.limits.MaxListedWaiters)
	if !ok {
		return
	}
	stale, ok := s.readLocal(w, r)
	if !ok || !s.reads.take(w, r, s.ctx.Done()) {
		return
	}
	defer s.reads.done()
	out := struct {
		Locks []LockJSON `json:"locks"`
		Next  string     `json:"next,omitempty"` // the ?after= of the next page
		Stale bool       `json:"stale,omitempty"`
	}{Locks: []LockJSON{}, Stale: stale}
	desc := descriptions{}
	var holders []lockinfo.SessionID
	page, more := s.n.Locks(q.Get("prefix"), q.Get("after"), limit)
	if more {
		out.Next = page[len(page)-1].Name
	}
	for _, li := range page {
		out.Locks = append(out.Locks, s.lockJSON(li, waiters, desc))
		if li.Held {
			holders = append(holders, li.Holder.Session)
		}
	}
	if !stale {
		left := s.leasesLeft(r.Context(), holders)
		for i := range out.Locks {
			if h := out.Locks[i].Holder; h != nil {
				d, ok := left[lockinfo.SessionID(h.Session)]
				h.LeaseLeftMS = msPtr(d, ok)
			}
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// sessions answers GET /v1/sessions?limit=&after=: a page of the
// cluster's sessions in id order (at most Limits.MaxListedLocks, and at
// most 1,000) after the id ?after=, with their lease time left; next is
// the ?after= of the next page.
func (s *Server) sessions(w http.ResponseWriter, r *http.Request) {
	limit, ok := listParam(w, r, "limit", s.limits.MaxListedLocks, s.limits.MaxListedLocks)
	if !ok {
		return
	}
	var after uint64
	if v := r.URL.Query().Get("after"); v != "" {
		var err error
		if after, err = strconv.ParseUint(v, 10, 63); err != nil {
			writeBad(w, "after: want a session id")
			return
		}
	}
	stale, ok := s.readLocal(w, r)
	if !ok || !s.reads.take(w, r, s.ctx.Done()) {
		return
	}
	defer s.reads.done()
	page, more := s.n.Sessions(lockinfo.SessionID(after), limit)
	out := struct {
		Sessions []SessionJSON `json:"sessions"`
		Total    int           `json:"total"`
		Next     uint64        `json:"next,omitempty"` // the ?after= of the next page
		Stale    bool          `json:"stale,omitempty"`
	}{Sessions: []SessionJSON{}, Total: s.n.Stats().Sessions, Stale: stale}
	if more {
		out.Next = uint64(page[len(page)-1].ID)
	}
	ids := make([]lockinfo.SessionID, 0, len(page))
	for _, si := range page {
		out.Sessions = append(out.Sessions, SessionJSON{ID: uint64(si.ID), Description: si.Description, TTLMS: si.TTL.Milliseconds(),
			LockDelayMS: si.LockDelay.Milliseconds(), CreatedAtUnixMS: nsToMS(si.CreatedAt), Locks: si.Locks})
		ids = append(ids, si.ID)
	}
	if !stale {
		left := s.leasesLeft(r.Context(), ids)
		for i := range out.Sessions {
			d, ok := left[lockinfo.SessionID(out.Sessions[i].ID)]
			out.Sessions[i].LeaseLeftMS = msPtr(d, ok)
		}
	}
	writeJSON(w, http.StatusOK, out)
}
