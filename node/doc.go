// Package node is one raftlock replica: a hashicorp/raft server with the
// lock state machine (package fsm), one TCP port for Raft and forwarding
// (package transport), gossip membership (hashicorp/memberlist), and what
// runs on the leader — group commit, session expiry, lock-delays,
// membership reconciliation. Applications start a Node, give it to lockapi,
// and close it; lockapi is the API for locks.
//
// # For applications
//
// Start (start.go) with a Config (config.go, config_membership.go;
// DefaultConfig, Validate), WaitReady, Status (status.go), Close (a
// restart: the node stays a member), Leave (a decommission, leave.go),
// Kill (a crash, for tests; stop.go). Read the local state without the
// network through Holder, Lock, Locks, Session, Sessions, Stats and Digest
// (reads.go); Sync first for a linearizable read.
//
// # For lockapi
//
// Propose and Apply (propose.go) commit a command — group-committed on the
// leader, forwarded (batched) from a follower — and return its result;
// KeepAlive (keepalive.go) renews a session on the leader, never through
// the log (a follower sends the keepalives that come together in one
// request: keepalive_batch.go); Subscribe (events.go) delivers what the
// local FSM applies, and with EarlyGrants the hand-offs the leader
// announces before this replica applies them (OnEarlyGrant: straight to the
// subscriber's waiter, on the goroutine that received the announcement).
//
// # Where each behaviour lives
//
//   - Group commit (batcher.go, propose.go): the leader keeps one raft
//     Apply in flight and gathers every command that arrives meanwhile into
//     the next entry (commit); a follower sends concurrent commands to the
//     leader in one RPC (forward), with a few RPCs in flight. Both linger
//     briefly for callers that come straight back. Retries, give-ups and
//     the classification of errors (what is retried, what wraps
//     ErrNoQuorum or ErrNotProposed) are in retry.go.
//   - Forwarding and the node-to-node protocol (rpc.go: the handler; wire.go:
//     the message formats; peerinfo.go: the peer-info RPC;
//     rpc_membership.go: membership messages). transport carries the bytes.
//   - Session expiry (expiry.go, expiry_heap.go, expiry_delays.go): on the
//     leader, every session's deadline in a heap (keepalives move it); the
//     takeover grace; ExpireSessions for the overdue; lock-delays timed on
//     the leader's monotonic clock and ended with EndDelay. A narrow host
//     (expiryHost) separates its decisions from the node.
//   - Read barrier (reads.go): Sync asks the leader for raft's commit index
//     (after its takeover barrier) and waits until the local FSM applied it
//     (applied.go); verify.go batches the leader's VerifyLeader rounds.
//   - Grant announcements (announce.go, announce_route.go): the leader
//     tells the replica a waiter lives on at once about the hand-off grant it
//     applied (every other replica when it does not know which), so that a
//     waiter on a follower wakes after one RPC.
//   - Subscriptions (events.go, observer.go): the FSM observer fans events
//     out to subscriptions by owner, session, lock or all, never blocking.
//   - Versions (version.go, halt.go): the cluster version in the log, raised
//     once every server supports it; a replica that meets what it does not
//     know halts instead of skipping.
//   - Identity (identity.go, peercheck.go): node id, incarnation (per data
//     dir), Raft id "<id>~<incarnation>", cluster id; the transport hello
//     refuses other clusters; voteguard.go keeps a node from voting while
//     its own incarnation is not a voter.
//   - Formation (formation.go, formation_propose.go; the decisions in
//     internal/membership/formation.go): founding one first configuration,
//     single-decree Paxos among the founders.
//   - Membership (reconcile.go, probe.go; the decisions in
//     internal/membership/plan.go): the leader probes every server and
//     candidate and makes one configuration change at a time — members join
//     as non-voters and are promoted once stable; joins of static nodes
//     (join.go); disaster recovery (recover.go); refusals a node learns of
//     (refusals.go).
//   - Gossip (gossip*.go, member.go): memberlist, the member table, the
//     metadata each node publishes, the views the planners read; the
//     memberlist transports are in internal/gossipnet.
//   - Storage (storage.go, storage_faults.go): raft-boltdb/v2 and file
//     snapshots under DataDir, or memory; fault injection for tests.
//     Snapshots (storage_snapshot.go) are paced so that their encoding
//     leaves the processor to Raft and the applies
//     (storage_snapshot_pace.go), and written back to the disk in steps
//     so that their final sync does not stall the log's fsyncs
//     (storage_snapshot_writeback.go).
//   - Metrics (metrics.go): raftlock_node_*.
//
// # Goroutines
//
// Every goroutine a node starts is tracked (Node.wg) and ends when Close
// returns; goleak checks it in every test package. Raft's own goroutines
// stop with raft.Shutdown (stop.go).
package node
