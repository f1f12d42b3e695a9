package main

import (
	"github.com/raftlock/raftlock/bench/internal/etcdsys"
	"github.com/raftlock/raftlock/bench/internal/lockservice"
)

// The systems this binary can benchmark. To add one, implement
// lockservice.System in its own package and register it here (raftlock
// registers in systems_raftlock.go).
func init() {
	lockservice.Register(etcdsys.System())
}
