package fsm

import (
	"cmp"
	"iter"
	"maps"
	"slices"

	"github.com/google/btree"

	"github.com/raftlock/raftlock/internal/lockinfo"
)

// cowMap is a map that a snapshot freezes in O(shards) instead of O(n):
// its entries are spread over a fixed number of shards (plain maps) by a
// deterministic hash of the key; freeze copies the slice of shard
// pointers, and the live map copies a shard the first time it changes one
// after a freeze. Between two snapshots each shard is copied at most once,
// so what a freeze cost in one apply (a copy of every entry, which stopped
// every apply while Raft took a snapshot of a million locks) is spread over
// the applies that change something, each paying for the shards it
// touches (a few hundred entries each at a million).
//
// The shard layout is invisible: iteration order is unspecified (as a
// map's), and every order that reaches a snapshot or a result is sorted.
// The hash is not keyed, so keys chosen to collide make one large shard —
// no worse than the single map it replaces.
//
// A map made by newOrderedCowMap also keeps its keys in order (a B-tree
// of the keys, in memory only: frozen copies and snapshots leave it out),
// so that a listing reads one page of keys from a cursor in O(log n +
// page) instead of sorting them all (ascend). Keeping it costs O(log n)
// per key added or removed, and no allocation per operation once the
// tree has grown (its nodes are recycled).
//
// The zero value is not usable: use newCowMap. Not safe for concurrent
// use; a frozen copy is immutable and may be read from any goroutine.
type cowMap[K comparable, V any] struct {
	gen    uint64 // a shard of another gen is shared with a frozen copy
	shift  uint8  // 64 - log2(len(shards))
	hash   func(K) uint64
	shards []*cowShard[K, V] // nil: no entry yet
	n      int
	order  *btree.BTreeG[K] // the keys in order (newOrderedCowMap); nil otherwise and in frozen copies
}

type cowShard[K comparable, V any] struct {
	gen uint64
	m   map[K]V
}

// newCowMap returns an empty map of 1<<bits shards.
func newCowMap[K comparable, V any](bits uint8, hash func(K) uint64) *cowMap[K, V] {
	return &cowMap[K, V]{shift: 64 - bits, hash: hash, shards: make([]*cowShard[K, V], 1<<bits)}
}

// orderDegree is the degree of the key order's B-tree: nodes of up to 63
// keys, four levels for a million.
const orderDegree = 32

// newOrderedCowMap is newCowMap that also keeps its keys in order.
func newOrderedCowMap[K cmp.Ordered, V any](bits uint8, hash func(K) uint64) *cowMap[K, V] {
	m := newCowMap[K, V](bits, hash)
	m.order = btree.NewG(orderDegree, cmp.Less[K])
	return m
}

// Shard counts: a million locks are ~250 entries a shard; the sessions
// and the delays are fewer.
const (
	lockShardBits    = 12
	sessionShardBits = 10
	delayShardBits   = 10
)

func newLockMap() *cowMap[string, *lock] {
	return newOrderedCowMap[string, *lock](lockShardBits, hashString)
}

func newSessionMap() *cowMap[lockinfo.SessionID, *session] {
	return newOrderedCowMap[lockinfo.SessionID, *session](sessionShardBits, func(id lockinfo.SessionID) uint64 { return uint64(id) })
}

func newDelayMap() *cowMap[string, int64] {
	return newCowMap[string, int64](delayShardBits, hashString)
}

// hashString is FNV-1a (64 bits).
func hashString(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}

// shard returns the index of k's shard (Fibonacci hashing: the top bits of
// the hash times 2^64/φ, so that sequential ids spread evenly too).
func (m *cowMap[K, V]) shard(k K) int {
	return int((m.hash(k) * 0x9E3779B97F4A7C15) >> m.shift)
}

func (m *cowMap[K, V]) len() int { return m.n }

// get returns k's value, or the zero value if there is none.
func (m *cowMap[K, V]) get(k K) V {
	v, _ := m.lookup(k)
	return v
}

func (m *cowMap[K, V]) lookup(k K) (V, bool) {
	if s := m.shards[m.shard(k)]; s != nil {
		v, ok := s.m[k]
		return v, ok
	}
	var zero V
	return zero, false
}

// own returns shard i private to m (copied if a frozen copy shares it;
// created if absent).
func (m *cowMap[K, V]) own(i int) *cowShard[K, V] {
	s := m.shards[i]
	switch {
	case s == nil:
		s = &cowShard[K, V]{gen: m.gen, m: make(map[K]V)}
	case s.gen != m.gen:
		s = &cowShard[K, V]{gen: m.gen, m: maps.Clone(s.m)}
	default:
		return s
	}
	m.shards[i] = s
	return s
}

func (m *cowMap[K, V]) set(k K, v V) {
	s := m.own(m.shard(k))
	n := len(s.m)
	s.m[k] = v
	if len(s.m) != n {
		m.n++
		if m.order != nil {
			m.order.ReplaceOrInsert(k)
		}
	}
}

func (m *cowMap[K, V]) del(k K) {
	i := m.shard(k)
	if s := m.shards[i]; s == nil {
		return
	} else if _, ok := s.m[k]; !ok {
		return
	}
	s := m.own(i)
	delete(s.m, k)
	m.n--
	if m.order != nil {
		m.order.Delete(k)
	}
}

// reserve makes room for about n entries in an empty map (a decoder's
// hint, so that restoring a snapshot does not grow every shard by steps).
func (m *cowMap[K, V]) reserve(n int) {
	per := n >> (64 - m.shift)
	if m.n != 0 || per == 0 {
		return
	}
	for i := range m.shards {
		m.shards[i] = &cowShard[K, V]{gen: m.gen, m: make(map[K]V, per+per/8)}
	}
}

// all iterates over every entry, in no particular order.
func (m *cowMap[K, V]) all() iter.Seq2[K, V] {
	return func(yield func(K, V) bool) {
		for _, s := range m.shards {
			if s == nil {
				continue
			}
			for k, v := range s.m {
				if !yield(k, v) {
					return
				}
			}
		}
	}
}

// keys iterates over every key, in no particular order.
func (m *cowMap[K, V]) keys() iter.Seq[K] {
	return func(yield func(K) bool) {
		for k := range m.all() {
			if !yield(k) {
				return
			}
		}
	}
}

// ascend calls fn with the entries whose keys are at or above from, in key
// order, until fn returns false: O(log n) to start, then O(1) amortised per
// entry. Only for a map made by newOrderedCowMap (live, not frozen).
func (m *cowMap[K, V]) ascend(from K, fn func(K, V) bool) {
	m.order.AscendGreaterOrEqual(from, func(k K) bool { return fn(k, m.get(k)) })
}

// freeze returns an immutable copy of m in O(shards): the copy shares
// every shard, and m copies a shard before it next changes it. The copy
// has no key order (snapshots do not need it, and it is not copy-on-write).
func (m *cowMap[K, V]) freeze() *cowMap[K, V] {
	c := *m
	c.shards = slices.Clone(m.shards)
	c.order = nil
	m.gen++
	return &c
}
