package node

import (
	"crypto/x509"
	"fmt"
	"net/url"
	"slices"

	"github.com/raftlock/raftlock/internal/membership"
	"github.com/raftlock/raftlock/transport"
)

// The transport hello (transport.Identity) carries every node's id,
// incarnation and cluster id on every Raft and RPC connection, both ways.

// helloIdentity is what this node says about itself on a new connection.
func (n *Node) helloIdentity() transport.Identity {
	id := n.ident()
	return transport.Identity{NodeID: id.NodeID, Incarnation: id.Incarnation, ClusterID: id.ClusterID}
}

// checkPeer vets a peer's hello: a node of another cluster is refused (both
// ways, on Raft and RPC connections alike), so that two clusters can never
// exchange Raft messages. A peer without a cluster id (a node that has not
// joined one yet) is accepted.
func (n *Node) checkPeer(peer transport.Identity, inbound bool) error {
	cid := n.ident().ClusterID
	if peer.ClusterID != "" && cid != "" && peer.ClusterID != cid {
		err := fmt.Errorf("%w: node %s belongs to cluster %s, this node to %s", membership.ErrForeignCluster, peer.NodeID, peer.ClusterID, cid)
		n.refusals.add("cluster_id", err.Error(), peer.NodeID)
		n.metrics.memberConflicts.WithLabelValues("cluster_id").Inc()
		return err
	}
	return nil
}

// acceptLegacy: peers of the previous release (no hello) are admitted
// during a rolling upgrade — until the cluster version says every server
// speaks the new protocol.
func (n *Node) acceptLegacy() bool {
	return n.clusterVersion() < 2
}

// clusterVersion is the cluster version committed in the log.
func (n *Node) clusterVersion() uint64 { return n.fsm.ClusterVersion() }

// certNames reports whether a certificate names node id: as its subject's
// common name, a DNS name, or a URI "raftlock://<id>" (or "spiffe://…/<id>"
// whose last path element is id).
func certNames(c *x509.Certificate, id string) bool {
	if c == nil {
		return false
	}
	if c.Subject.CommonName == id || slices.Contains(c.DNSNames, id) {
		return true
	}
	for _, u := range c.URIs {
		if u == nil {
			continue
		}
		if u.Scheme == "raftlock" && (u.Host == id || u.Opaque == id) {
			return true
		}
		if u.Scheme == "spiffe" && lastPathElem(u) == id {
			return true
		}
	}
	return false
}

func lastPathElem(u *url.URL) string {
	p := u.Path
	for i := len(p) - 1; i >= 0; i-- {
		if p[i] == '/' {
			return p[i+1:]
		}
	}
	return p
}
