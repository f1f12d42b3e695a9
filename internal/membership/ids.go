package membership

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/hashicorp/raft"
)

// Node ids and Raft ids. A node's Raft id is "<node id>~<incarnation>"
// (RaftIDFor), the incarnation naming its data dir; a data dir from before
// incarnations has its node id as Raft id.

// raftIDSep separates the node id from the incarnation in a Raft id. Node
// ids cannot contain it (ValidID).
const raftIDSep = "~"

// idPattern is what a node id may look like: it appears in Raft ids,
// gossip names, certificates, metrics and URLs.
var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// ValidID reports whether id is an acceptable node id.
func ValidID(id string) error {
	if !idPattern.MatchString(id) {
		return fmt.Errorf("ID %q: want 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit", id)
	}
	return nil
}

// RaftIDFor is the Raft id of a node id's incarnation.
func RaftIDFor(id, incarnation string) string { return id + raftIDSep + incarnation }

// SplitRaftID returns the node id and incarnation a Raft id names. A Raft id
// without an incarnation (a data dir from before incarnations) has none.
func SplitRaftID(rid string) (id, incarnation string) {
	id, inc, _ := strings.Cut(rid, raftIDSep)
	return id, inc
}

// NodeOf returns the node id a Raft id names.
func NodeOf(rid raft.ServerID) string {
	id, _ := SplitRaftID(string(rid))
	return id
}

// IsHexID reports whether s is 16 lowercase hex digits (incarnations and
// cluster ids).
func IsHexID(s string) bool {
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

// ErrForeignCluster: a peer or member belongs to another cluster (its
// cluster id differs from this node's).
var ErrForeignCluster = errors.New("node: member of another cluster")
