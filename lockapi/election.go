package lockapi

import (
	"context"
	"fmt"
	"time"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/node"
)

// Leader describes who holds an election's lock.
type Leader struct {
	Name        string        // the lock
	Session     fsm.SessionID // zero when nobody leads
	Description string        // the leading session's owner description
	Token       fsm.Token     // the leader's fencing token
	Since       time.Time     // when it was granted (leader clock)
}

// Valid reports whether somebody leads.
func (l Leader) Valid() bool { return l.Session != 0 }

// Election is a read-only view of a lock used for leader election (see
// RunSingleton): who leads now, and every change, from any replica. It is
// safe for concurrent use.
type Election struct {
	n    *node.Node
	name string
}

// NewElection returns the view of the election held on lock name. A nil
// node or a bad name is refused with ErrInvalidArgument.
func NewElection(n *node.Node, name string) (*Election, error) {
	if n == nil {
		return nil, invalid("nil node")
	}
	if err := fsm.ValidateLockName(name); err != nil {
		return nil, invalid("election name: %v", err)
	}
	return &Election{n: n, name: name}, nil
}

// Leader returns the current leader as this replica knows it (fast; may lag
// the cluster by the replication delay). The zero Leader (Valid false) means
// nobody leads.
func (e *Election) Leader() Leader {
	h, ok := e.n.Holder(e.name)
	if !ok {
		return Leader{Name: e.name}
	}
	return Leader{Name: e.name, Session: h.Session, Description: h.Description, Token: h.Token, Since: time.Unix(0, h.AcquiredAt)}
}

// LeaderSync is Leader after a linearizable read barrier: it reflects every
// change committed before the call. A nil ctx is refused with
// ErrInvalidArgument.
func (e *Election) LeaderSync(ctx context.Context) (Leader, error) {
	if ctx == nil {
		return Leader{}, invalid("nil context")
	}
	if err := e.n.Sync(ctx); err != nil {
		return Leader{}, fmt.Errorf("lockapi: election %q: %w", e.name, err)
	}
	return e.Leader(), nil
}

// Observe returns a channel that receives the current leader at once and
// then every change (a new token, or nobody leading), as this replica
// applies it. A slow receiver only misses intermediate values, never the
// latest. The channel is closed when ctx ends. A nil ctx is refused with
// ErrInvalidArgument.
func (e *Election) Observe(ctx context.Context) (<-chan Leader, error) {
	if ctx == nil {
		return nil, invalid("nil context")
	}
	sub, err := e.n.Subscribe(node.EventFilter{Lock: e.name}, 16)
	if err != nil {
		return nil, err
	}
	out := make(chan Leader)
	go func() {
		defer close(out)
		defer sub.Close()
		cur := e.Leader()
		pending := true
		for {
			var send chan Leader
			if pending {
				send = out
			}
			select {
			case <-ctx.Done():
				return
			case send <- cur:
				pending = false
			case <-sub.C:
			case <-sub.Resync:
			}
			if l := e.Leader(); l.Token != cur.Token {
				cur, pending = l, true
			}
		}
	}()
	return out, nil
}
