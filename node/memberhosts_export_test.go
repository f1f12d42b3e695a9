package node

// IsMemberHost reports whether the node tells its transport that host is a
// member's source address (transport.Config.MemberHost).
func IsMemberHost(n *Node, host string) bool { return n.memberHosts.Has(host) }
