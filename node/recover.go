package node

import (
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/storage"
)

// recover implements Config.Recover before Raft starts: the node's Raft
// configuration becomes {this node, voter}, with every entry of its log kept
// (raft.RecoverCluster replays the log into a scratch state machine and
// writes a snapshot of it with the new configuration). It runs once per
// data dir.
func (n *Node) recover(rc *raft.Config, hasState bool) error {
	if !hasState {
		return fmt.Errorf("%w: Recover: the data dir has no Raft state to recover", ErrInvalidConfig)
	}
	if done, err := n.store.Stable.Get(storage.KeyRecovered); err == nil && len(done) > 0 {
		n.log.Error("Recover is set, but this data dir was recovered already (at " + string(done) + "): starting normally; remove Recover from the configuration")
		return nil
	}
	conf := raft.Configuration{Servers: []raft.Server{{Suffrage: raft.Voter, ID: rc.LocalID, Address: raft.ServerAddress(n.trans.Addr())}}}
	if err := raft.RecoverCluster(rc, fsm.New(nil), n.store.Logs, n.store.Stable, n.store.Snaps, n.trans.RaftTransport(), conf); err != nil {
		return fmt.Errorf("node: recover: %w", err)
	}
	if err := n.store.Stable.Set(storage.KeyRecovered, []byte(time.Now().UTC().Format(time.RFC3339))); err != nil {
		return fmt.Errorf("node: recover: %w", err)
	}
	n.log.Warn("recovered: this node is now the only voter of its cluster; other members join as new members", "raft_id", rc.LocalID, "addr", n.trans.Addr())
	return nil
}

// startFormation starts, for a node without Raft state, founding
// (formation) and — without gossip — joining (joinLoop). With gossip and no
// BootstrapExpect, the node waits for the leader to add it.
func (n *Node) startFormation(hasState bool) {
	static := !n.cfg.gossipOn() && len(n.cfg.Peers) > 0
	if hasState && !static {
		return
	}
	if n.formation == nil && !static {
		return
	}
	if f := n.formation; f != nil && n.members != nil {
		f.candidates = n.members.FormationCandidates
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		if f := n.formation; f != nil {
			f.run(n.ctx)
		}
		if static {
			n.joinLoop(n.ctx)
		}
	}()
}
