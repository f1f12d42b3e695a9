package node_test

import (
	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/node"
)

// noQuotas turns the replicated quotas off (benchmarks at sizes beyond them).
func noQuotas(cfg *node.Config) { cfg.Limits = fsm.Limits{} }
