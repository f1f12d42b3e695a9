package membership

import "time"

// The planner's input and output (PlanMembership, plan.go).

// State is a member's liveness as the leader sees it (through gossip, or
// through its own probes in a static cluster).
type State string

// Member states.
const (
	Alive   State = "alive"
	Suspect State = "suspect" // alive, but not heard from directly for a while
	Dead    State = "dead"    // stopped answering (failed, or stopped for a restart)
	Left    State = "left"    // left gossip gracefully
)

// Server is one server of the latest Raft configuration.
type Server struct {
	RaftID string // "<node id>~<incarnation>", or the node id (a data dir from before incarnations)
	NodeID string
	Addr   string
	Voter  bool
}

// Member is a node the leader knows about (gossip member, static join
// request), under its current incarnation.
type Member struct {
	NodeID, RaftID, Addr string
	ClusterID            string // "" before the node belongs to a cluster
	State                State
	Since                time.Time // when State began
	Leaving              bool      // decommissioning (Leave): remove it
	HasState             bool      // it has Raft state
	// Verified: the member's identity was proven — the leader reached it at
	// Addr and it answered as NodeID/RaftID (with TLS: its certificate names
	// NodeID). Only verified members are added or re-addressed.
	Verified bool
	// MaxVersion: the highest cluster version the member's binary supports
	// (with Verified; 0 unknown). A member below the cluster version is not
	// added: it could not apply the log.
	MaxVersion uint64
}

// Health is what the leader's probes say of a server.
type Health struct {
	Reachable bool      // the last probe was answered
	Healthy   bool      // answered, same term, caught up, in contact with the leader
	Since     time.Time // when Healthy last became true (zero while unhealthy)
	Down      time.Time // when probes began to fail (zero while reachable)
	// Gone: the server's address answered as another incarnation of the
	// same node — this incarnation's data is gone and it will not return.
	Gone bool
}

// Input is everything the planner looks at.
type Input struct {
	Self           string    // the leader's Raft id
	ClusterID      string    // this cluster's id ("" if not known yet)
	ClusterVersion uint64    // the cluster version in force (0: not known)
	Now            time.Time // the leader's clock
	Servers        []Server  // the latest Raft configuration
	// Members by node id. With gossip, a configured server that gossip does
	// not know is in Missing (since when); without gossip, the leader's
	// probes stand in for gossip (State Dead since Health.Down).
	Members map[string]Member
	Missing map[string]time.Time // Raft id → since
	Health  map[string]Health    // Raft id → the leader's probes
	Gossip  bool                 // liveness comes from gossip (else from probes)

	MaxVoters     int           // voters kept at most (odd counts preferred)
	MaxNonvoters  int           // non-voters kept at most
	ReapTimeout   time.Duration // a failed server is removed after this (guarded)
	Stabilization time.Duration // a non-voter is promoted after being healthy this long
	LastAdd       time.Time     // when a server was last added
	AddInterval   time.Duration // at most one addition per interval
}

// ActionKind is one kind of configuration change.
type ActionKind string

// Configuration changes.
const (
	AddNonvoter   ActionKind = "add_nonvoter"
	Promote       ActionKind = "promote"
	Demote        ActionKind = "demote"
	RemoveLeaving ActionKind = "remove_leaving" // decommissioned (Leave)
	Replace       ActionKind = "replace"        // an older incarnation of a member that came back without its data
	Reap          ActionKind = "reap"           // failed longer than the reap timeout
	UpdateAddr    ActionKind = "update_address"
)

// Action is the next configuration change.
type Action struct {
	Kind   ActionKind
	RaftID string
	NodeID string
	Addr   string
	Voter  bool // UpdateAddr: it is a voter
	Why    string
}

// Note is a refusal to report (deduplicated by Reason and Key). Member and
// Notify name the refused node (its node id, and the Raft/RPC address it
// claims), so that it can be told why.
type Note struct {
	Reason string // "address", "duplicate_id", "cluster_id", "unverified", "version", "leave_refused", "reap_refused", "replace_refused", "full"
	Key    string
	Msg    string
	Member string
	Notify string
	Args   []any
}

// Plan is the planner's decision.
type Plan struct {
	Action *Action // the next change; nil: nothing to do now
	Notes  []Note
	Next   time.Time // when something becomes due (zero: nothing scheduled)
}
