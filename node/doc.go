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
// restart: the node stays a member), Leave (a decommission, leave.go);
// tests crash a node with internal/nodeopts.Kill (stop.go). Read the
// local state without the network through Holder, Lock, Locks, Session,
// Sessions and Stats (reads.go); Sync first for a linearizable
// read.
//
// # For operators
//
// Operator (operator.go) groups the operator actions, with their errors:
// Revoke, EndSession, Backup and Restore (admin.go), RemovePeer and
// TransferLeadership (admin_members.go), Snapshot (snapshot.go); any
// replica forwards what must run on the leader (admin_rpc.go). Package
// admin serves them over HTTP.
//
// # For lockapi
//
// What lockapi (and admin) call on a node is no exported method: they reach
// it through internal/replica's Replica interface, which replica.Of(n)
// returns (nodeReplica, replica.go, registered in an init function). Its
// Propose and Apply (Node.propose and Node.apply, propose.go) commit a
// command — group-committed on the leader, forwarded (batched) from a
// follower — and return its result; KeepAlive (Node.keepAlive,
// keepalive.go) renews a session on the leader — not through the log while
// the leader stays; after a leader change each live session's first
// keepalive is recorded once (see "Sessions across leader changes") — (a
// follower sends the keepalives that come together in one request:
// keepalive_batch.go); Subscribe (Node.subscribe, events.go) delivers what
// the local FSM applies, and with EarlyGrants the hand-offs the leader
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
//     (expiryHost) separates its decisions from the node. What every
//     replica remembers of when it applied takeover markers and delay
//     starts: apply_times.go; renewals in the log: keepalive_renew.go.
//   - Leadership rounds (verify.go batches them; confirm_term.go): a
//     keepalive or a read is confirmed by a quorum of voters that answered
//     the leader's term after it arrived (ConfirmTerm, cluster version 4;
//     raft's VerifyLeader below).
//   - Read barrier (reads.go): Sync asks the leader for raft's commit index
//     (after its takeover barrier) and waits until the local FSM applied it
//     (applied.go).
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
//     refuses other clusters; cluster.VoteGuard keeps a node from voting while
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
//   - Gossip (package internal/gossip; startMembership and gossipStatus
//     here): memberlist, the member table, the metadata each node
//     publishes, the views the planners read; the memberlist transports
//     are in internal/gossipnet.
//   - Storage (package internal/storage; openStorage, MigrateLogStore and
//     Operator.Snapshot here): raft-boltdb/v2 or raft-wal and file snapshots
//     under DataDir, or memory; fault injection for tests (the DiskFault hook, internal/nodehooks).
//     Snapshots are paced so that their encoding leaves the processor to
//     Raft and the applies, and written back to the disk in steps so that
//     their final sync does not stall the log's fsyncs.
//   - Metrics (metrics.go): raftlock_node_*.
//
// # Sessions across leader changes
//
// A leader keeps deadlines in memory and acknowledges a keepalive only with
// evidence, from after it arrived, that no later leader had been elected: a
// ConfirmTerm round (confirm_term.go; raft's VerifyLeader counts replies to
// requests sent before it, and a deposed leader acknowledged keepalives the
// next leader's grace did not cover). A new leader gives each session the
// takeover grace, TTL + ElectionTimeout, so that no acknowledgement of its
// predecessors is cut short.
//
// From cluster version 4 a session that stops renewing ends within a
// bound, whatever the number of leader changes: a session silent since T
// (the last keepalive a leader accepted) is expired by
//
//	T + 2·(TTL + ElectionTimeout) + 2·E + 3·δ + λ
//
// (E: the longest time without a leader that has taken over; δ: the
// longest commit latency; λ: the lag of an entry's apply on a replica that
// later leads). Likewise (from cluster version 2, with no log change) a
// lock-delay that began at D ends by D + LockDelay + E + 2·δ + λ: a new
// leader times it from its own apply of the entry that started it. Before,
// every new leader gave every session a fresh grace and timed every
// pending lock-delay again in full, so that leaders changing faster than
// that kept a silent session, or a delayed lock, from its waiters for as
// long as the changes went on. The lease model (internal/testing/model/lease, its
// package doc) checks both bounds.
//
// The session bound costs one exception to "keepalives are never logged"
// (docs/guarantees.md words it so): after each leader change, the first
// keepalive of each live session writes one small record, Renewed (a batch
// of keepalives, one command; group commit puts many in one entry), and
// the leader acknowledges it once that record committed. While the leader
// stays no keepalive writes anything. No design without such a record can
// bound the silence: take two executions with identical logs, one in which
// the session stopped renewing at T, one in which each leader acknowledged
// it once just before it was deposed; a new leader cannot tell them apart,
// and in the second it must not expire the session before the last
// acknowledgement + TTL − margin — so in the first, every leader change
// would give the session a new lease. With the record a new leader times a
// session from its own apply of the first takeover marker (fsm.Takeover,
// the barrier) after the session's last record, the same for every later
// leader (keepalive_renew.go, apply_times.go, fsm.Renewed).
//
// # Goroutines
//
// Every goroutine a node starts is tracked (Node.wg) and ends when Close
// returns; goleak checks it in every test package. Raft's own goroutines
// stop with raft.Shutdown (stop.go).
package node
