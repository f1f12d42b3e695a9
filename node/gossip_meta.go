package node

import (
	"encoding/json"
	"fmt"
	"net"
)

// metaVersion is the version of the gossip metadata (memberMeta).
const metaVersion = 1

// memberMeta is what a node publishes about itself in gossip (JSON, at most
// memberlist.MetaMaxSize bytes). Fields after Leaving were added with
// identities; a node of the previous release publishes none of them (and
// ignores them), so both can be members during a rolling upgrade.
type memberMeta struct {
	V       int    `json:"v"`    // metadata version
	Wire    int    `json:"wire"` // forwarding protocol version (wire.go)
	ID      string `json:"id"`
	Addr    string `json:"addr"`              // Raft/RPC address
	Expect  int    `json:"expect,omitempty"`  // BootstrapExpect
	State   bool   `json:"state,omitempty"`   // has Raft state: part of a cluster
	Leaving bool   `json:"leaving,omitempty"` // decommissioning (Leave): remove me
	Inc     string `json:"inc,omitempty"`     // incarnation of its data dir
	RaftID  string `json:"rid,omitempty"`     // its Raft server id
	Cluster string `json:"cid,omitempty"`     // its cluster id ("" before it has one)
}

// decodeMeta parses and checks a member's metadata; on failure it also
// returns the conflict reason ("protocol" or "metadata").
func decodeMeta(name string, b []byte) (memberMeta, string, error) {
	var md memberMeta
	if err := json.Unmarshal(b, &md); err != nil {
		return md, "metadata", fmt.Errorf("undecodable metadata: %v", err)
	}
	switch {
	case md.V != metaVersion || md.Wire != int(wireVersion):
		return md, "protocol", fmt.Errorf("metadata version %d, wire version %d; this node speaks %d and %d", md.V, md.Wire, metaVersion, wireVersion)
	case md.ID != name:
		return md, "metadata", fmt.Errorf("metadata id %q differs from member name %q", md.ID, name)
	case md.Expect < 0:
		return md, "metadata", fmt.Errorf("negative BootstrapExpect %d", md.Expect)
	case md.Inc != "" && !isHexID(md.Inc):
		return md, "metadata", fmt.Errorf("bad incarnation %q", md.Inc)
	case md.Cluster != "" && !isHexID(md.Cluster):
		return md, "metadata", fmt.Errorf("bad cluster id %q", md.Cluster)
	}
	if md.RaftID != "" {
		id, inc := splitRaftID(md.RaftID)
		if id != md.ID || (inc != "" && inc != md.Inc) || (inc == "" && md.RaftID != md.ID) {
			return md, "metadata", fmt.Errorf("raft id %q does not name node %q with incarnation %q", md.RaftID, md.ID, md.Inc)
		}
	}
	if host, _, err := net.SplitHostPort(md.Addr); err != nil || host == "" {
		return md, "metadata", fmt.Errorf("bad Raft address %q", md.Addr)
	}
	return md, "", nil
}

// raftID returns the member's Raft id: as published, or (a node of the
// previous release) its node id.
func (md memberMeta) raftID() string {
	if md.RaftID != "" {
		return md.RaftID
	}
	return md.ID
}

// isHexID reports whether s is 16 lowercase hex digits (incarnations and
// cluster ids).
func isHexID(s string) bool {
	if len(s) != 16 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
