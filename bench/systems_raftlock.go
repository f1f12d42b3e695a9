//go:build raftlock

package main

import (
	"github.com/raftlock/raftlock/bench/internal/lockservice"
	"github.com/raftlock/raftlock/bench/internal/raftlocksys"
)

func init() { lockservice.Register(raftlocksys.System()) }
