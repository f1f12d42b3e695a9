package chaos

import "sort"

// Replicas never diverge: every event applied at one (index, position) is
// the same on every replica (found while collecting), every digest sampled
// at one applied index is the same on every replica, across the whole run
// (snapshots restored included), and every log entry read from disk at one
// (index, term) is the same entry (Raft's log matching property).

// maxReported bounds the violations one checker reports per history.
const maxReported = 10

func (c *checker) checkSamples() {
	for i, d := range c.h.Disagreements {
		if i == maxReported {
			break
		}
		c.fail(CheckReplicasAgree, "", "%s", d)
	}
	first := map[uint64]DigestSample{}
	nodes := map[uint64]map[string]bool{}
	bad := 0
	for _, s := range c.h.Samples {
		if nodes[s.Index] == nil {
			nodes[s.Index] = map[string]bool{}
		}
		nodes[s.Index][s.Node] = true
		f, ok := first[s.Index]
		if !ok {
			first[s.Index] = s
			continue
		}
		if f.Hash != s.Hash {
			if bad < maxReported {
				c.fail(CheckReplicasAgree, "", "at applied index %d %s had digest %s (%s, t=%d) and %s had %s (%s, t=%d)",
					s.Index, f.Node, f.Hash, f.Source, f.At, s.Node, s.Hash, s.Source, s.At)
			}
			bad++
		}
	}
	for _, ns := range nodes {
		if len(ns) > 1 {
			c.r.IndexesCompared++
		}
	}
}

// checkLeaders: Raft's election safety — at most one leader per term.
func (c *checker) checkLeaders() {
	by := map[uint64]LeaderSample{}
	for _, l := range c.h.Leaders {
		if f, ok := by[l.Term]; ok && f.Node != l.Node {
			c.fail(CheckElectionSafety, "", "two leaders in term %d: %s (t=%d) and %s (t=%d)", l.Term, f.Node, f.At, l.Node, l.At)
			continue
		}
		by[l.Term] = l
	}
}

func (c *checker) checkLogMatching() {
	type pos struct{ index, term uint64 }
	first := map[pos]EntrySample{}
	bad := 0
	for _, e := range c.h.Entries {
		k := pos{e.Index, e.Term}
		f, ok := first[k]
		if !ok {
			first[k] = e
			continue
		}
		c.r.EntriesCompared++
		if f.Hash != e.Hash {
			if bad < maxReported {
				c.fail(CheckLogMatching, "", "index %d term %d holds different entries on %s (%s) and %s (%s): two logs with one history of terms",
					e.Index, e.Term, f.Node, f.Hash, e.Node, e.Hash)
			}
			bad++
		}
	}
}

// sortedSamples returns the config samples in time order.
func sortedConfigs(cs []ConfigSample) []ConfigSample {
	out := append([]ConfigSample(nil), cs...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].At < out[j].At })
	return out
}
