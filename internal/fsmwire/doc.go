// Package fsmwire holds what the lock state machine (package fsm) and the
// node that drives it share on the wire: the numbered vocabulary of log
// entries, results and events — command op numbers ([Op]), entry versions,
// result statuses ([Status]), event kinds ([EventKind]), release reasons
// ([Reason]) and quota kinds ([Quota]) — the byte-level codec primitives
// ([Decoder], [AppendString]), the hard limits of command arguments with
// their validators ([ValidateLockName] ...), and the sentinel errors that
// results map to.
//
// Every number here is part of the log, snapshot or node-to-node format
// and must never be renumbered. It imports nothing of raftlock, so that
// fsm, node and lockapi can all import it.
package fsmwire
