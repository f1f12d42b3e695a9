package node

// GossipConfig configures membership through gossip (hashicorp/memberlist),
// Config.Gossip. Gossip is on when Addr is set; the zero value
// means no gossip (a static cluster of Peers). Every node then carries its
// id, Raft/RPC address and protocol version in its gossip metadata, and the
// Raft leader keeps the Raft configuration in line with the live members
// (see Config.MaxVoters and Config.ReapTimeout). With gossip, every member
// of the cluster must gossip: a configured server that gossip never sees is
// treated as failed. Gossip only decides membership: locks, leases and
// quorum stay with Raft, so a node whose gossip is cut keeps serving as
// long as Raft reaches it (until it is reaped). Two live members with one
// id, or with one Raft address, are refused (logged, counted in
// raftlock_node_membership_conflicts_total), never merged. A stranger on
// the gossip port never becomes a member: with TLS the leader adds only
// members whose certificate names their id.
type GossipConfig struct {
	// Addr is the bind address (UDP and TCP) of the gossip layer,
	// "ip:port"; port 0 picks a free port, an empty host binds every
	// interface.
	Addr string
	// AdvertiseAddr is the gossip address ("ip:port") other members reach;
	// default: the bound address.
	AdvertiseAddr string
	// Join lists seed gossip addresses ("host:port"). The node joins through
	// them in the background, every Timing.RetryJoinInterval: from Start
	// until one of them answers, and again whenever it finds itself alone.
	// (Between those, it tries to reconnect to a failed member each round,
	// so that both sides of a healed partition merge again, and to the
	// servers of its Raft configuration at the addresses it remembers.) A
	// node that was never in the cluster knows no other address: while
	// none of its seeds answers it stays alone, Status.GossipErr says "no
	// seed reachable" with each seed tried, and so does WaitReady's error. A
	// host name is resolved again at every attempt.
	Join []string
	// Key encrypts and authenticates gossip (AES-GCM with the memberlist
	// keyring): 16, 24 or 32 bytes. Nodes with another key (or none) cannot
	// join. Nil: gossip in clear text.
	Key []byte
	// AllowUnencrypted allows gossip without Key while TLS is on. Off by
	// default: with mutual TLS, membership trusts only members whose
	// certificate names their id, but an unencrypted gossip port still lets
	// anyone spread false member states; say explicitly if that is
	// acceptable (a closed network).
	AllowUnencrypted bool
	// Timing tunes failure detection; zero value: LANGossipTiming.
	Timing GossipTiming
}
