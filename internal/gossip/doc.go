// Package gossip is a node's gossip layer over hashicorp/memberlist: who
// the members are, what each publishes, and the views the node's
// membership driver reads. It decides nothing about the Raft configuration.
//
//   - Start and Layer: memberlist with this node's delegates and transport
//     (internal/gossipnet), the join loop through the seeds and the
//     reconnects after a partition (joinLoop), the run loop that publishes
//     the metadata and forgets long-gone members; Leave, AnnounceLeaving
//     and Stop end it. Config and Host are what it needs of the node.
//   - Meta: the metadata each node publishes (id, Raft address, protocol
//     version, incarnation, Raft id, cluster id, BootstrapExpect, state),
//     checked on arrival (decodeMeta); a member of another cluster or with
//     this node's id is refused (NotifyAlive, NotifyConflict).
//   - The member table and its views: View (alive, suspect, dead, left),
//     MemberAddrs, CountMembers, Problem (Status's gossip error) and
//     FormationCandidates (founding through BootstrapExpect).
//   - Known peers (knownPeers): the gossip addresses of members seen
//     alive, kept in the stable store to reconnect after a restart.
//   - Refusal notices (Refusal, Notify, NotifyMsg): a leader tells a member
//     why it was refused, as a gossip user message.
package gossip
