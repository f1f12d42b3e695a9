// Package storage is where a node's Raft keeps its log, its stable state and
// its snapshots, and what wraps them on the way.
//
//   - The stores (Stores, Open, Memory): raft-boltdb/v2 (Bolt, the default)
//     or hashicorp/raft-wal (WAL, openWAL) under the data dir, behind a
//     cache of recent entries, or everything in memory; Other and Holds
//     find which kind a data dir holds.
//   - Migrate converts a stopped node's data dir from one kind to the
//     other, crash-safe; the node's own stable keys (KeyIncarnation and the
//     rest) are listed once for it.
//   - Snapshots: Paced rests the FSM's snapshot encoder so that it leaves
//     the processor to Raft and the applies (pacedFSM); stepSyncStore writes
//     a snapshot back to the disk in steps as it is written, so that its
//     final sync does not stall the log's fsyncs.
//   - Snapshot anchors (WithAnchors, Restored): a workaround in the log
//     store for a livelock of hashicorp/raft v1.7.3 after a follower
//     installs a snapshot (anchoredLogs).
//   - Fault injection for tests (WithFaults, Op): node's DiskFault test hook (internal/nodehooks).
//
// Nothing here knows the node: package node opens the stores in Start and
// hands them to Raft.
package storage
