// Package cluster is the node's membership driver, as far as it stands
// apart from the node: what keeps a member's Raft traffic safe and
// reachable while the configuration changes.
//
//   - VoteGuard: a node grants votes only while its own Raft id (its data
//     dir's incarnation) is a voter in its latest configuration; the
//     transport asks it (Allow) before Raft sees a vote request.
//   - MemberHosts: the members' source addresses (static peers, servers of
//     the Raft configuration, gossip members and known peers, host names
//     resolved over TCP), for the transport's handshake slots reserved to
//     members; rebuilt every second and at once on Wake.
//
// The pure decisions (formation, the reconcile planner, node and Raft ids)
// are in internal/membership; the loops that drive them (formation,
// reconcile, probes, joins, recovery, leave) still run in package node,
// which holds the Raft instance, the transport and the RPC handlers they
// use.
package cluster
