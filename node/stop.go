package node

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/raftlock/raftlock/internal/nodehooks"
)

// Stopping a node: Close (a restart: it stays a member), kill (a crash,
// for tests: internal/nodeopts.Kill).
// Leave (a decommission) is in leave.go.

// Close stops the node for a restart: it stays a member of the cluster
// (like a Consul server with leave_on_terminate=false). A leader first hands
// leadership to another voter; with gossip, the node leaves gossip
// gracefully; then Raft stops, the transport closes every connection and
// the storage is closed. The leader keeps the node in the Raft
// configuration — so stopping every replica and starting them again, in any
// order, resumes the cluster with its state — and removes it only if it
// stays away longer than ReapTimeout (and never below a quorum). To remove
// a node for good, use Leave. Calls in progress fail with ErrClosed. Close
// returns when everything has stopped or ctx ends (the shutdown then
// continues in the background). Safe to call more than once.
func (n *Node) Close(ctx context.Context) error {
	if err := checkCtx(ctx); err != nil {
		return err
	}
	n.closing.Do(func() {
		done := make(chan struct{})
		go func() {
			defer close(done)
			n.errc = n.shutdown()
		}()
		select {
		case <-done:
		case <-ctx.Done():
			n.errc = fmt.Errorf("node: close: %w (shutdown continues)", ctx.Err())
		}
	})
	return n.errc
}

// kill stops the node abruptly, as a crash would look to the rest of the
// cluster: no leadership hand-off, no gossip leave (members see it fail).
// Storage is closed cleanly, so the node can be restarted from its data dir.
// Tests and fault injection reach it through internal/nodeopts.Kill.
func (n *Node) kill(ctx context.Context) error {
	if err := checkCtx(ctx); err != nil {
		return err
	}
	n.crash.Store(true)
	return n.Close(ctx)
}

func (n *Node) shutdown() error {
	if !n.crash.Load() && n.raft.State() == raft.Leader && n.hasOtherVoters() {
		if err := n.raft.LeadershipTransfer().Error(); err != nil {
			n.log.Warn("leadership transfer before shutdown failed", "err", err)
		}
	}
	if n.members != nil {
		if !n.crash.Load() {
			n.members.Leave()
		}
		n.members.Stop()
		if !n.crash.Load() {
			n.members.FlushKnown() // a restart finds what gossip showed last (kill is a crash: what was saved)
		}
	}
	n.cancel()
	close(n.closed)
	n.proposer.close()
	n.forwarder.close()
	n.keepalives.close()
	n.commits.Wait()  // raft still runs: each batch's future is answered (committed, or leadership lost)
	n.verifier.stop() // likewise its VerifyLeader round (raft drops one still queued at shutdown)
	f := n.raft.Shutdown()
	n.trans.Close()
	err := f.Error()
	n.waitRaftConns()
	n.wg.Wait()
	if cerr := n.store.Close(); cerr != nil && err == nil {
		err = cerr
	}
	n.metrics.unregister(n.cfg.Registerer)
	n.log.Info("node closed")
	if err != nil {
		return fmt.Errorf("node: close: %w", err)
	}
	return nil
}

// waitRaftConns waits (boundedly) for raft's inbound connection goroutines,
// which may still be writing to the stable store, before it is closed.
func (n *Node) waitRaftConns() {
	ctx, cancel := context.WithTimeout(context.Background(), raftConnsDrain)
	defer cancel()
	if err := n.trans.WaitRaftConns(ctx); err != nil {
		n.log.Warn("raft connection handlers still running at close", "waited", raftConnsDrain)
	}
}

// raftConnsDrain bounds the wait of waitRaftConns.
const raftConnsDrain = 5 * time.Second

// init registers the test hooks' accessor and kill with internal/nodehooks,
// for internal/nodeopts.
func init() {
	nodehooks.Of = func(cfg any) *nodehooks.Hooks { return &cfg.(*Config).hooks }
	nodehooks.Kill = func(ctx context.Context, n any) error { return n.(*Node).kill(ctx) }
}
