package gossip

import (
	"encoding/json"
	"fmt"
	"net"

	"github.com/raftlock/raftlock/internal/membership"
)

// metaVersion is the version of the gossip metadata (Meta).
const metaVersion = 1

// Meta is what a node publishes about itself in gossip (JSON, at most
// memberlist.MetaMaxSize bytes). Fields after Leaving were added with
// identities; a node of the previous release publishes none of them (and
// ignores them), so both can be members during a rolling upgrade.
type Meta struct {
	V       int    `json:"v"`    // metadata version
	Wire    int    `json:"wire"` // node-to-node protocol version (Config.Wire)
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
func decodeMeta(name string, b []byte, wire int) (Meta, string, error) {
	var md Meta
	if err := json.Unmarshal(b, &md); err != nil {
		return md, "metadata", fmt.Errorf("undecodable metadata: %v", err)
	}
	switch {
	case md.V != metaVersion || md.Wire != wire:
		return md, "protocol", fmt.Errorf("metadata version %d, wire version %d; this node speaks %d and %d", md.V, md.Wire, metaVersion, wire)
	case md.ID != name:
		return md, "metadata", fmt.Errorf("metadata id %q differs from member name %q", md.ID, name)
	case md.Expect < 0:
		return md, "metadata", fmt.Errorf("negative BootstrapExpect %d", md.Expect)
	case md.Inc != "" && !membership.IsHexID(md.Inc):
		return md, "metadata", fmt.Errorf("bad incarnation %q", md.Inc)
	case md.Cluster != "" && !membership.IsHexID(md.Cluster):
		return md, "metadata", fmt.Errorf("bad cluster id %q", md.Cluster)
	}
	if md.RaftID != "" {
		id, inc := membership.SplitRaftID(md.RaftID)
		if id != md.ID || (inc != "" && inc != md.Inc) || (inc == "" && md.RaftID != md.ID) {
			return md, "metadata", fmt.Errorf("raft id %q does not name node %q with incarnation %q", md.RaftID, md.ID, md.Inc)
		}
	}
	if host, _, err := net.SplitHostPort(md.Addr); err != nil || host == "" {
		return md, "metadata", fmt.Errorf("bad Raft address %q", md.Addr)
	}
	return md, "", nil
}

// EffectiveRaftID returns the member's Raft id: as published, or (a node of
// the previous release) its node id.
func (md Meta) EffectiveRaftID() string {
	if md.RaftID != "" {
		return md.RaftID
	}
	return md.ID
}
