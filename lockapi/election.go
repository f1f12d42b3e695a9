package lockapi

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/lockinfo"
	"github.com/raftlock/raftlock/internal/replica"
	"github.com/raftlock/raftlock/node"
)

// Leader describes who holds an election's lock.
type Leader struct {
	Name        string    // the lock
	Session     SessionID // zero when nobody leads
	Description string    // the leading session's owner description
	Token       Token     // the leader's fencing token
	Since       time.Time // when it was granted (leader clock)
	Value       string    // the value the leader attached (Campaign, Proclaim)
}

// Valid reports whether somebody leads.
func (l Leader) Valid() bool { return l.Session != 0 }

// Election is a view of a lock used for leader election (see
// RunSingleton): who leads now, and every change, from any replica — and,
// through Campaign, a candidacy of its own, with Proclaim and Resign (as
// etcd's concurrency.Election). It is safe for concurrent use.
type Election struct {
	n    *node.Node
	r    replica.Replica // n's (replica.Of)
	name string

	mu    sync.Mutex
	lease *Lease // this Election's own candidacy, once Campaign won
}

// NewElection returns the view of the election held on lock name. A nil
// node or a bad name is refused with ErrInvalidArgument.
func NewElection(n *node.Node, name string) (*Election, error) {
	if n == nil {
		return nil, invalid("nil node")
	}
	if err := fsmwire.ValidateLockName(name); err != nil {
		return nil, invalid("election name: %v", err)
	}
	return &Election{n: n, r: replica.Of(n), name: name}, nil
}

// Leader returns the current leader as this replica knows it (fast; may lag
// the cluster by the replication delay). The zero Leader (Valid false) means
// nobody leads.
func (e *Election) Leader() Leader {
	h, ok := e.r.Holder(e.name)
	if !ok {
		return Leader{Name: e.name}
	}
	return leaderOf(e.name, h)
}

func leaderOf(name string, h lockinfo.Holder) Leader {
	if h.Session == 0 {
		return Leader{Name: name}
	}
	return Leader{Name: name, Session: SessionID(h.Session), Description: h.Description, Token: h.Token, Since: time.Unix(0, h.AcquiredAt), Value: h.Value}
}

// LeaderSync is Leader after a linearizable read barrier: it reflects every
// change committed before the call. A nil ctx is refused with
// ErrInvalidArgument.
func (e *Election) LeaderSync(ctx context.Context) (Leader, error) {
	if ctx == nil {
		return Leader{}, invalid("nil context")
	}
	if err := e.r.Sync(ctx); err != nil {
		return Leader{}, fmt.Errorf("lockapi: election %q: %w", e.name, err)
	}
	return e.Leader(), nil
}
