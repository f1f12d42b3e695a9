package chaos

import "github.com/raftlock/raftlock/internal/lockinfo"

// What the harness samples from the replicas during a run, and what a
// class expects of a correct cluster.

// DigestSample is one replica's state digest at an applied index.
type DigestSample struct {
	Node   string `json:"node"`
	Index  uint64 `json:"index"`
	Hash   string `json:"hash"`
	At     int64  `json:"at"`
	Source string `json:"source"` // "live" or "disk" (replayed from its log)
}

// ConfigServer is one server of a Raft configuration.
type ConfigServer struct {
	ID    string `json:"id"`
	Addr  string `json:"addr,omitempty"`
	Voter bool   `json:"voter"`
}

// ConfigSample is a Raft configuration one replica held.
type ConfigSample struct {
	Node   string `json:"node"`
	At     int64  `json:"at"`
	Source string `json:"source"` // "live" (Status), "log" (an entry on disk), "snapshot"
	// Index and Term locate a configuration read from disk (0 when live).
	Index uint64 `json:"index,omitempty"`
	Term  uint64 `json:"term,omitempty"`
	// ClusterID is the cluster identity the replica reported ("" while
	// the library has none to report).
	ClusterID string         `json:"cluster_id,omitempty"`
	Servers   []ConfigServer `json:"servers"`
	// Leader: a live sample taken from the node that led then — the
	// configuration the cluster acts on (a follower's may be stale).
	Leader bool `json:"leader,omitempty"`
}

// LeaderSample is a replica seen as leader of a term.
type LeaderSample struct {
	Node string `json:"node"`
	Term uint64 `json:"term"`
	At   int64  `json:"at"`
}

// EntrySample is one log entry read from a replica's disk: its position
// and a hash of its type and data.
type EntrySample struct {
	Node  string `json:"node"`
	Index uint64 `json:"index"`
	Term  uint64 `json:"term"`
	Hash  string `json:"hash"`
	At    int64  `json:"at"`
}

// Expect is a class's model of a correct cluster.
type Expect struct {
	// Members are every node that may ever be in this cluster's
	// configuration; empty: not checked.
	Members []string `json:"members,omitempty"`
	// Addrs are members' own Raft addresses, where fixed: a configuration
	// naming a member at another address was redirected to someone else.
	Addrs map[string]string `json:"addrs,omitempty"`
	// Unreachable are gossip members that Raft could not reach during a
	// window: they must not be voters then.
	Unreachable []Unreachable `json:"unreachable,omitempty"`
	// OddVoters: an even number of voters must not last longer than
	// StableFor (nanoseconds) in a configuration.
	OddVoters bool  `json:"odd_voters,omitempty"`
	StableFor int64 `json:"stable_for_ns,omitempty"`
	// ExactlyOnce: the cluster was formed by this release, which raises
	// the cluster version at formation (not the upgrade class, whose first
	// replicas run the previous release at version 1, where a redelivered
	// Acquire may legally be granted again): the exactly-once and FIFO
	// checks read the log from the version raise on.
	ExactlyOnce bool `json:"exactly_once,omitempty"`
}

// Unreachable is a member that Raft cannot reach from From to To.
type Unreachable struct {
	ID   string `json:"id"`
	From int64  `json:"from"`
	To   int64  `json:"to"`
}

// Probe is one availability check: a fresh client acquiring and releasing
// a lock through Node, where the class expects the cluster to serve.
type Probe struct {
	What     string `json:"what"`
	Node     string `json:"node"`
	Lock     string `json:"lock"`
	Start    int64  `json:"start"`
	Deadline int64  `json:"deadline"`
	Done     int64  `json:"done,omitempty"` // 0: it did not succeed
	Err      string `json:"err,omitempty"`
	// Resume marks the probe after the last fault healed (its Done−Start is
	// the class's time to resume).
	Resume bool `json:"resume,omitempty"`
}

// EndHold is one holder or waiter of a lock table (the final one, or a
// backup's).
type EndHold struct {
	Lock    string `json:"lock"`
	Session uint64 `json:"session"`
	Owner   string `json:"owner"`
	Token   uint64 `json:"token,omitempty"`
	Waiter  bool   `json:"waiter,omitempty"`
	// Shared and Permits: a read grant, a semaphore's permits (held or
	// waited for).
	Shared  bool `json:"shared,omitempty"`
	Permits int  `json:"permits,omitempty"`
}

// tableHolds lists the holders, shared grants and waiters (in queue
// order) of a lock table.
func tableHolds(locks []lockinfo.LockInfo) []EndHold {
	var out []EndHold
	for _, l := range locks {
		if l.Held {
			out = append(out, EndHold{Lock: l.Name, Session: uint64(l.Holder.Session), Owner: l.Holder.Owner.String(), Token: uint64(l.Holder.Token)})
		}
		for _, g := range l.Shared {
			out = append(out, EndHold{Lock: l.Name, Session: uint64(g.Session), Owner: g.Owner.String(), Token: uint64(g.Token), Shared: g.Shared, Permits: g.Permits})
		}
		for _, w := range l.Waiters {
			out = append(out, EndHold{Lock: l.Name, Session: uint64(w.Session), Owner: w.Owner.String(), Waiter: true, Shared: w.Shared, Permits: w.Permits})
		}
	}
	return out
}

// GivenUp is an acquisition its client let go of without the cluster
// confirming it (a failed Unlock): the library must release it.
type GivenUp struct {
	Owner string `json:"owner"`
	Op    int    `json:"op"`
	Err   string `json:"err"`
}

// EndState is the lock table at the end, when no client holds anything.
type EndState struct {
	At    int64     `json:"at"`
	Node  string    `json:"node"`
	Index uint64    `json:"index"`
	Holds []EndHold `json:"holds"`
	// Known are owner ids clients still hold leases for (normally none).
	Known   []string  `json:"known,omitempty"`
	GivenUp []GivenUp `json:"given_up,omitempty"`
	// Sessions are the live sessions of clients that are still running
	// (the others must have expired or closed by then).
	Sessions []uint64 `json:"sessions,omitempty"`
}
