package node

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"

	"github.com/hashicorp/raft"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/membership"
	"github.com/raftlock/raftlock/internal/storage"
)

// Identity.
//
// A node has three names:
//
//   - its node id (Config.ID): the operator's name for it, stable for the
//     life of the deployment (a hostname, a pod name);
//   - its incarnation: a random id made the first time a data dir is used
//     and kept in it. A node whose data dir was wiped (a replaced disk, an
//     emptyDir volume, an in-memory node restarted) comes back with a new
//     incarnation;
//   - its Raft id: the id of its Raft server, "<node id>~<incarnation>"
//     for every data dir made by this version. (A data dir that has Raft
//     state from before incarnations existed keeps its node id as Raft id.)
//
// Because the Raft id names the incarnation, a node that lost its state
// can never be its old self in the Raft configuration: it is a new server,
// which the leader adds as a non-voter and promotes once it has caught up,
// and until its own incarnation is a voter in its configuration it never
// grants a vote (cluster.VoteGuard). Votes and acknowledgements it gave before the
// loss stay with the old Raft id, whose log is gone with the disk — so the
// cluster cannot count them twice.
//
// The cluster id names one cluster for its whole life: made when it is
// founded (formation), kept in each member's stable store and in the
// replicated state, carried in gossip metadata and in the transport hello.
// Anything that carries another cluster id is refused, so two clusters
// whose gossip meets never merge.

// keyLeft marks a data dir whose node was removed by Leave (Start refuses
// it with ErrDecommissioned unless Recover is set); it lives with the other
// stable-store keys Migrate copies (storage.KeyIncarnation and its
// neighbours).
var keyLeft = storage.KeyLeft

// nodeIdentity is who this node is, as it tells its peers (transport hello,
// gossip metadata, peer-info RPC).
type nodeIdentity struct {
	NodeID      string
	RaftID      string
	Incarnation string
	ClusterID   string // "" before the node belongs to a cluster
}

// identity is a node's identity, loaded from its stable store at Start. The
// cluster id is set once (when the node founds or joins a cluster) and then
// never changes.
type identity struct {
	nodeID, raftID, incarnation string
	stable                      raft.StableStore

	mu        sync.Mutex
	clusterID string
}

// loadIdentity reads (or, for a new data dir, makes and stores) the node's
// incarnation and Raft id. hasState says whether the data dir had Raft state
// before this start.
func loadIdentity(stable raft.StableStore, nodeID string, hasState bool) (*identity, error) {
	get := func(k []byte) (string, error) {
		v, err := stable.Get(k)
		if err != nil && err.Error() != "not found" { // raft-boltdb's "not found"
			return "", fmt.Errorf("node: read %s: %w", k, err)
		}
		return string(v), nil
	}
	put := func(k []byte, v string) error {
		if err := stable.Set(k, []byte(v)); err != nil {
			return fmt.Errorf("node: write %s: %w", k, err)
		}
		return nil
	}
	inc, err := get(storage.KeyIncarnation)
	if err != nil {
		return nil, err
	}
	if inc == "" {
		var b [8]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, fmt.Errorf("node: make incarnation: %w", err)
		}
		inc = hex.EncodeToString(b[:])
		if err := put(storage.KeyIncarnation, inc); err != nil {
			return nil, err
		}
	}
	rid, err := get(storage.KeyRaftID)
	if err != nil {
		return nil, err
	}
	if rid == "" {
		rid = membership.RaftIDFor(nodeID, inc)
		if hasState {
			rid = nodeID // state from before incarnations: keep its Raft id
		}
		if err := put(storage.KeyRaftID, rid); err != nil {
			return nil, err
		}
	}
	if id, _ := membership.SplitRaftID(rid); id != nodeID {
		return nil, fmt.Errorf("%w: the data dir belongs to node %q (Raft id %q), not %q", ErrInvalidConfig, id, rid, nodeID)
	}
	cid, err := get(storage.KeyClusterID)
	if err != nil {
		return nil, err
	}
	return &identity{nodeID: nodeID, raftID: rid, incarnation: inc, stable: stable, clusterID: cid}, nil
}

// get returns the current identity.
func (id *identity) get() nodeIdentity {
	id.mu.Lock()
	defer id.mu.Unlock()
	return nodeIdentity{NodeID: id.nodeID, RaftID: id.raftID, Incarnation: id.incarnation, ClusterID: id.clusterID}
}

// cluster returns the cluster id ("" while there is none).
func (id *identity) cluster() string {
	id.mu.Lock()
	defer id.mu.Unlock()
	return id.clusterID
}

// errClusterIDChange: a second, different cluster id for one data dir.
var errClusterIDChange = errors.New("node: the data dir already belongs to another cluster")

// setCluster records (and persists) the cluster id. Setting the id the node
// already has is a no-op; another one is refused.
func (id *identity) setCluster(cid string) error {
	if cid == "" {
		return nil
	}
	id.mu.Lock()
	defer id.mu.Unlock()
	switch id.clusterID {
	case cid:
		return nil
	case "":
	default:
		return fmt.Errorf("%w: it has cluster id %s, not %s", errClusterIDChange, id.clusterID, cid)
	}
	if err := id.stable.Set(storage.KeyClusterID, []byte(cid)); err != nil {
		return fmt.Errorf("node: write cluster id: %w", err)
	}
	id.clusterID = cid
	return nil
}

// ident returns this node's identity. Safe for concurrent use.
func (n *Node) ident() nodeIdentity {
	if n.id == nil { // before Start loaded it
		return nodeIdentity{NodeID: n.cfg.ID, RaftID: n.cfg.ID}
	}
	return n.id.get()
}

// initCluster (leader, from cluster version 2 on) records the cluster id in
// the replicated state if it is not there yet: the id this node founded the
// cluster with, or — a cluster from before cluster ids, upgraded — a new
// one. Every replica then persists it (adoptClusterID), and so does every
// member added later, from the log or a snapshot.
func (n *Node) initCluster(ctx context.Context) {
	for n.fsm.ClusterVersion() >= 2 && n.fsm.ClusterID() == "" {
		cid := n.ident().ClusterID
		if cid == "" {
			var b [8]byte
			rand.Read(b[:])
			cid = hex.EncodeToString(b[:])
		}
		out := n.proposeAsLeader(ctx, fsm.InitCluster{ID: cid})
		if out.err == nil && out.result().Status == fsmwire.StatusOK {
			n.log.Info("cluster id recorded in the replicated state", "cluster_id", cid, "index", out.index)
			return
		}
		n.log.Warn("recording the cluster id failed; will retry", "err", out.err, "status", out.result().Status)
		if sleepCtx(ctx, n.cfg.Timing.HeartbeatTimeout) != nil {
			return
		}
	}
}

// adoptClusterID persists the cluster id of the replicated state (FSM
// goroutine: after InitCluster is applied or a snapshot restored). A data
// dir that already names another cluster keeps its id and says so: that is
// a node of another cluster that was given this one's log, which the hello
// checks should have made impossible.
func (n *Node) adoptClusterID() {
	cid := n.fsm.ClusterID()
	if cid == "" || n.id == nil {
		return
	}
	if err := n.id.setCluster(cid); err != nil {
		n.log.Error("the replicated state names another cluster than this data dir", "state_cluster_id", cid, "err", err)
	}
}
