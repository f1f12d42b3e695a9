package main

import (
	"github.com/raftlock/raftlock/bench/internal/etcdsys"
	"github.com/raftlock/raftlock/bench/internal/lockservice"
	"github.com/raftlock/raftlock/bench/internal/raftlocksys"
)

// The systems this binary can benchmark. To add one, implement
// lockservice.System in its own package and register it here.
func init() {
	lockservice.Register(etcdsys.System())
	lockservice.Register(raftlocksys.System())
	lockservice.Register(raftlocksys.WALSystem())
}
