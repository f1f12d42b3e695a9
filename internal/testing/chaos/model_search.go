package chaos

import (
	"fmt"
	"sort"

	"github.com/anishathalye/porcupine"
)

// What keeps porcupine's search over one lock's history small, and what is
// reported when it does not finish.
//
// The model needs a grant's token to exceed the last granted one. Alone,
// that lets porcupine linearize token 9 while token 7 of the same lock is
// still pending: token 7 can then never step, but the depth-first search
// learns it only on reaching token 7's return, and until then explores every
// subset of the operations it may skip. Where many grants share one commit
// window that is exponential: one log entry (the expiry sweep after a
// stop-all/start-all) that grants and expires a queue of acquisitions whose
// sessions died puts all of them at one instant of fake time — in-process
// restart seed 72 had 22 such pairs in one entry, and porcupine needed over
// three minutes for that lock (Unknown at the 60 s budget).
//
// Every complete linearization takes a lock's grants in increasing token
// order, so two grants adjacent in it are adjacent among the lock's tokens
// in the history. A grant therefore also names its predecessor (Prev) and
// steps only right after it: this prunes partial orders that could never
// complete, and no others, so the verdict is the same — only reached in
// time linear in the grants. Porcupine still decides, from the clients'
// real-time windows, where each grant, release and answer fits; nothing is
// taken from the log's order that the tokens did not already imply.

// chainGrants returns ops with each grant's Prev set: the next lower token
// among the grants of the same lock in ops (0 for the lowest). ops is not
// modified.
func chainGrants(ops []porcupine.Operation) []porcupine.Operation {
	tokens := map[string][]uint64{}
	for _, op := range ops {
		if in := op.Input.(lockInput); in.Kind == mGrant {
			tokens[in.Lock] = append(tokens[in.Lock], in.Token)
		}
	}
	prev := map[string]map[uint64]uint64{}
	for l, ts := range tokens {
		sort.Slice(ts, func(i, j int) bool { return ts[i] < ts[j] })
		p := map[uint64]uint64{}
		var before uint64
		for _, t := range ts {
			if t != before {
				p[t] = before
				before = t
			}
		}
		prev[l] = p
	}
	out := make([]porcupine.Operation, len(ops))
	for i, op := range ops {
		if in := op.Input.(lockInput); in.Kind == mGrant {
			in.Prev = prev[in.Lock][in.Token]
			op.Input = in
		}
		out[i] = op
	}
	return out
}

// partitionLoad describes the hardest partition of ops for porcupine (the
// most operations in flight at one instant): for a report of Unknown.
func partitionLoad(m porcupine.Model, ops []porcupine.Operation) string {
	worst, worstOps, worstLock := -1, 0, ""
	for _, part := range m.Partition(ops) {
		if c := maxConcurrent(part); c > worst {
			worst, worstOps, worstLock = c, len(part), part[0].Input.(lockInput).Lock
		}
	}
	return fmt.Sprintf("hardest partition: lock %s, %d operations, up to %d in flight at once", worstLock, worstOps, worst)
}

// maxConcurrent is the most operations of ops whose closed intervals
// [Call, Return] share an instant.
func maxConcurrent(ops []porcupine.Operation) int {
	type edge struct {
		t     int64
		delta int
	}
	edges := make([]edge, 0, 2*len(ops))
	for _, op := range ops {
		edges = append(edges, edge{op.Call, 1}, edge{op.Return, -1})
	}
	sort.Slice(edges, func(i, j int) bool {
		if edges[i].t != edges[j].t {
			return edges[i].t < edges[j].t
		}
		return edges[i].delta > edges[j].delta // closed intervals: calls first
	})
	cur, most := 0, 0
	for _, e := range edges {
		cur += e.delta
		most = max(most, cur)
	}
	return most
}
