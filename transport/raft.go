package transport

import (
	"github.com/hashicorp/raft"

	"github.com/raftlock/raftlock/internal/hclogslog"
)

// RaftTransport returns the raft.NetworkTransport over this Transport's
// StreamLayer, with MaxPool = Config.RaftMaxPool, Timeout =
// Config.RaftTimeout and logs going to Config.Logger. It is built on the
// first call; later calls return the same one. Pass it to raft.NewRaft.
//
// Closing: raft closes it itself when raft.Shutdown completes, and
// Transport.Close closes it too (both are idempotent). To shut a node down
// without waiting on a peer that stopped answering, call
//
//	f := r.Shutdown() // stop raft's loops (returns at once)
//	t.Close()         // close every connection: no Raft I/O stays blocked
//	f.Error()         // wait for raft to finish
//
// Closing t first works too but makes raft log connection errors while it
// shuts down. After t.Close, RaftTransport returns a closed transport.
func (t *Transport) RaftTransport() *raft.NetworkTransport {
	t.raftOnce.Do(func() {
		nt := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
			Stream:  t.stream,
			MaxPool: t.cfg.RaftMaxPool,
			Timeout: t.cfg.RaftTimeout,
			Logger:  hclogslog.New(t.log, "raft-net"),
			// No pipelined replication. With the default (2 in flight) the
			// pipeline's channels are unbuffered, and in hashicorp/raft
			// v1.7.3 a follower's failed answer can deadlock it: the
			// decoder quits, the response reader blocks handing over the
			// next answer, and the sender blocks handing over one more
			// request, so the leader never sends that follower another
			// entry (heartbeats go on, so no election heals it) and its
			// Shutdown never returns (hashicorp/raft#612; the chaos
			// harness's restart seed 26 hung in Close about 1 run in 6).
			// One request in flight replicates synchronously; raft's own
			// measurements (hashicorp/raft#541) found pipelining of
			// little benefit with batching, which raftlock's group commit
			// does.
			MaxRPCsInFlight: 1,
		})
		t.mu.Lock()
		closed := t.closed
		t.raftNT = nt
		t.mu.Unlock()
		if closed {
			nt.Close()
		}
	})
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.raftNT
}
