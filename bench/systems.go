package main

import (
	"slices"

	"github.com/raftlock/raftlock/bench/internal/etcdsys"
	"github.com/raftlock/raftlock/bench/internal/floorsys"
	"github.com/raftlock/raftlock/bench/internal/lockservice"
	"github.com/raftlock/raftlock/bench/internal/raftlocksys"
)

// The systems this binary can benchmark. To add one, implement
// lockservice.System in its own package and register it here.
func init() {
	lockservice.Register(etcdsys.System())
	lockservice.Register(raftlocksys.System())
	lockservice.Register(raftlocksys.WALSystem())
	lockservice.Register(raftlocksys.HB1sSystem())
	lockservice.Register(raftlocksys.FastSystem())
	lockservice.Register(floorsys.System())
	lockservice.Register(floorsys.WALSystem())
}

// defaultSystems are the systems a run benchmarks without -systems: every
// registered one but the opt-in raftlock-hb1s and raftlock-fast.
func defaultSystems() []string {
	return slices.DeleteFunc(lockservice.Names(), func(n string) bool { return slices.Contains(raftlocksys.OptIn, n) })
}
