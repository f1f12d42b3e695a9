package node

// nodeIdentity is who this node is, as it tells its peers (transport hello,
// gossip metadata, peer-info RPC).
//
//   - NodeID: Config.ID, the operator's name for the node.
//   - RaftID: the id under which this data dir's Raft server is configured.
//   - Incarnation: a random id made when the data dir was first used; a node
//     whose data dir was wiped comes back with a new one.
//   - ClusterID: the id of the cluster this node belongs to ("" before it
//     belongs to one).
//
// (Filled in by the identity work of Safety I; until then only NodeID and
// RaftID are set.)
type nodeIdentity struct {
	NodeID      string
	RaftID      string
	Incarnation string
	ClusterID   string
}

// ident returns this node's identity. Safe for concurrent use.
func (n *Node) ident() nodeIdentity {
	return nodeIdentity{NodeID: n.cfg.ID, RaftID: n.cfg.ID}
}
