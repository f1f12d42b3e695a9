package node

import "github.com/hashicorp/raft"

// The Raft configuration as this node sees it (its latest, committed or
// not).

// others returns the servers of the latest configuration other than this
// node, and false if the configuration cannot be read (raft not running).
func (n *Node) others() ([]raft.Server, bool) {
	conf, ok := n.latestConfig()
	if !ok {
		return nil, false
	}
	out := make([]raft.Server, 0, len(conf.Servers))
	for _, s := range conf.Servers {
		if string(s.ID) != n.id.raftID {
			out = append(out, s)
		}
	}
	return out, true
}

// announcePeers returns the other servers in the configuration as the
// announcer addresses them (none if it cannot be read).
func (n *Node) announcePeers() []announcePeer {
	others, _ := n.others()
	peers := make([]announcePeer, len(others))
	for i, s := range others {
		peers[i] = announcePeer{id: string(s.ID), addr: string(s.Address)}
	}
	return peers
}

// hasOtherVoters reports whether another server is a voter.
func (n *Node) hasOtherVoters() bool {
	others, _ := n.others()
	for _, s := range others {
		if s.Suffrage == raft.Voter {
			return true
		}
	}
	return false
}

// latestConfig returns raft's latest configuration once raft runs.
func (n *Node) latestConfig() (raft.Configuration, bool) {
	if !n.started.Load() {
		return raft.Configuration{}, false
	}
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return raft.Configuration{}, false
	}
	return f.Configuration(), true
}

// inConfiguration reports whether this node's Raft id is in its latest
// configuration.
func (n *Node) inConfiguration() bool {
	conf, ok := n.latestConfig()
	if !ok {
		return false
	}
	return hasServer(conf, n.id.raftID)
}

// hasServer reports whether conf lists raftID.
func hasServer(conf raft.Configuration, raftID string) bool {
	for _, s := range conf.Servers {
		if string(s.ID) == raftID {
			return true
		}
	}
	return false
}

// hasRaftState reports whether this node's Raft has a log, a snapshot or a
// term: it belongs (or belonged) to a cluster and must never bootstrap.
func (n *Node) hasRaftState() bool {
	return n.raft.LastIndex() > 0 || n.raft.CurrentTerm() > 0
}
