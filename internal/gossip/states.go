package gossip

import "errors"

// ErrDuplicateID: another live member of the gossip cluster already uses this
// node's ID (node's ErrDuplicateID is this error).
var ErrDuplicateID = errors.New("node: duplicate node id")

// State is the state of a member as this node's gossip layer sees it (node's
// MemberState converts from it; the names are the same).
type State string

// Member states.
const (
	Alive   State = "alive"
	Suspect State = "suspect" // alive, but no direct probe answer for several probe cycles
	Dead    State = "dead"
	Left    State = "left"
)
