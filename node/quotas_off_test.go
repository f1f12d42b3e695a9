package node_test

import (
	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/node"
)

// noQuotas turns the replicated quotas off (benchmarks at sizes beyond
// them). A zero Limits means the defaults: every quota but the name
// length (which the hard limit bounds anyway) is set to 0, "none".
func noQuotas(cfg *node.Config) { cfg.Limits = fsm.Limits{MaxLockNameLen: fsmwire.MaxLockNameLen} }
