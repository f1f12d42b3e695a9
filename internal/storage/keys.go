package storage

// The node's own keys in the stable store, beside Raft's term and vote.
// Migrate copies them (stableBytesKeys).
var (
	// KeyIncarnation, KeyRaftID and KeyClusterID hold the node's identity.
	KeyIncarnation = []byte("raftlock/incarnation")
	KeyRaftID      = []byte("raftlock/raft_id")
	KeyClusterID   = []byte("raftlock/cluster_id")
	// KeyFormation holds the formation acceptor's record.
	KeyFormation = []byte("raftlock/formation")
	// KeyKnownPeers holds the gossip peers this node has known.
	KeyKnownPeers = []byte("raftlock/known_peers")
	// KeyRecovered marks a data dir that disaster recovery rewrote.
	KeyRecovered = []byte("raftlock/recovered")
	// KeyLeft marks a data dir whose node was removed by Leave: the time
	// (RFC 3339, UTC) and the cluster id. The node refuses to start on it
	// (node.ErrDecommissioned) unless recovering.
	KeyLeft = []byte("raftlock/left")
)
