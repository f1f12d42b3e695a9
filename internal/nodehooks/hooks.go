// Package nodehooks is where package node keeps its test hooks: the
// in-memory network's dialers and gossip listener, a skewed wall clock, disk
// faults and a pretended release (the highest cluster version a node
// reports). They are no part of node.Config's public fields: a test sets
// them with internal/nodeopts (nodeopts.Hooks), which reaches node's
// unexported Config field through the functions node registers here in its
// init. Production code never sets them; a nil hook means "as in
// production".
package nodehooks

import (
	"context"
	"net"
	"time"

	"github.com/raftlock/raftlock/internal/storage"
)

// Hooks are a node's test hooks; each nil field means the production
// behaviour.
type Hooks struct {
	// Dialer replaces TCP dials to other nodes (Config.Listener then
	// holds the in-memory network's listener).
	Dialer func(ctx context.Context, addr string) (net.Conn, error)
	// GossipListener and GossipDialer replace UDP/TCP for gossip: packets
	// then travel as short connections. The listener's address must be
	// "ip:port". Gossip is on when GossipListener is set.
	GossipListener net.Listener
	GossipDialer   func(ctx context.Context, addr string) (net.Conn, error)
	// WallClock replaces time.Now for the one thing that reads the wall
	// clock: the leader's timestamp in each log entry (informational: when
	// a lock was granted, a session opened). Nothing that safety depends on
	// reads it.
	WallClock func() time.Time
	// DiskFault is consulted before every log-store operation and
	// stable-store write; a non-nil error fails that operation as a failing
	// disk would (ENOSPC, EIO).
	DiskFault func(op storage.Op) error
	// MaxClusterVersion, when it returns more than 0, is the highest
	// cluster version the node reports and raises to (a node that pretends
	// to be of the previous release, then is "upgraded").
	MaxClusterVersion func() uint64
}

// Registered by package node's init: Of returns the hooks of the
// *node.Config cfg, to be set in place; Kill crashes the *node.Node n (no leadership hand-off,
// no gossip leave; storage closed cleanly).
var (
	Of   func(cfg any) *Hooks
	Kill func(ctx context.Context, n any) error
)
